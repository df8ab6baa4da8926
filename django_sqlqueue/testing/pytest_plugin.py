"""pytest fixtures for projects that use django-sqlqueue (with pytest-django).

Registered through the `pytest11` entry point `sqlqueue`, so pytest loads it once the package
is installed; it only defines fixtures, which do nothing until a test asks for one. Where
plugin autoloading is off (PYTEST_DISABLE_PLUGIN_AUTOLOAD), opt in with
`-p django_sqlqueue.testing.pytest_plugin` or `-p sqlqueue`.

- `sqlqueue`: run_jobs() and assertions on the jobs this test enqueued.
- `captured_jobs`: the jobs this test enqueued (a `CapturedJobs`).

Both need database access, which they ask pytest-django for (the `db` fixture; a test marked
`django_db(transaction=True)` keeps its own mode).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from ..models import Job
    from .capture import CapturedJobs


class SQLQueueFixture:
    """What the `sqlqueue` fixture gives a test."""

    def __init__(self, captured: CapturedJobs) -> None:
        self.captured = captured

    @property
    def jobs(self) -> list[Job]:
        """The jobs this test enqueued so far, in any status."""
        return self.captured.jobs

    def run_jobs(
        self,
        queue: str | Sequence[str] | None = None,
        name: str | Sequence[str] | None = None,
        *,
        max_jobs: int | None = None,
    ) -> list[Job]:
        from .running import run_jobs

        return run_jobs(queue, name, max_jobs=max_jobs)

    def assert_enqueued(self, name: str, /, *args: Any, **kwargs: Any) -> Job:
        return self.captured.assert_enqueued(name, *args, **kwargs)

    def assert_not_enqueued(self, name: str, /, *args: Any, **kwargs: Any) -> None:
        self.captured.assert_not_enqueued(name, *args, **kwargs)


@pytest.fixture
def captured_jobs(db: None) -> Iterator[CapturedJobs]:
    """The jobs enqueued during this test (read from the job table when looked at)."""
    from .capture import captured_jobs as capture

    with capture() as captured:
        yield captured


@pytest.fixture
def sqlqueue(captured_jobs: CapturedJobs) -> SQLQueueFixture:
    """`sqlqueue.run_jobs()`, `sqlqueue.assert_enqueued(name, **arguments)`, `sqlqueue.jobs`."""
    return SQLQueueFixture(captured_jobs)
