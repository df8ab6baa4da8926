"""The `@job` registry: one function per name, found through autodiscovery of `jobs.py`."""

from __future__ import annotations

import dataclasses
import inspect
import math
import re
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest

from django_sqlqueue import (
    InvalidJobError,
    JobAlreadyRegistered,
    JobHandler,
    UnknownJobError,
    job,
    registry,
)
from django_sqlqueue.backoff import Backoff
from django_sqlqueue.options import JobOptions
from tests.conftest import REPO_ROOT
from tests.testapp import jobs as testapp_jobs


def send_welcome(to: str) -> str:
    return f"welcome {to}"


def send_welcome_again(to: str) -> str:
    return f"hello {to}"


@pytest.fixture
def forget() -> Any:
    """Names registered by a test, removed afterwards so the next test starts clean."""
    names: list[str] = []
    yield names.append
    for name in names:
        registry.unregister(name)


class TestRegistration:
    def test_decorator_returns_a_handler_registered_under_its_name(self, forget: Any) -> None:
        forget("tests.registry.welcome")
        handler = job("tests.registry.welcome", queue="mail")(send_welcome)
        assert isinstance(handler, JobHandler)
        assert registry.get("tests.registry.welcome") is handler
        assert "tests.registry.welcome" in registry
        assert "tests.registry.welcome" in registry.names()
        assert handler("ann") == "welcome ann"

    def test_handler_keeps_its_options(self, forget: Any) -> None:
        forget("tests.registry.welcome")
        backoff = Backoff(base=1, cap=10, jitter=0)
        handler = job(
            "tests.registry.welcome",
            queue="mail",
            priority=5,
            max_attempts=2,
            timeout=30,
            backoff=backoff,
        )(send_welcome)
        options = handler.options
        assert (options.queue, options.priority, options.max_attempts) == ("mail", 5, 2)
        assert options.timeout == 30.0
        assert options.backoff is backoff
        assert handler.is_async is False
        assert options.takes_context is False

    def test_duplicate_name_names_both_places(self, forget: Any) -> None:
        forget("tests.registry.welcome")
        job("tests.registry.welcome")(send_welcome)
        with pytest.raises(JobAlreadyRegistered) as info:
            job("tests.registry.welcome")(send_welcome_again)
        message = str(info.value)
        assert "'tests.registry.welcome'" in message
        assert f"{__name__}.send_welcome " in message
        assert f"{__name__}.send_welcome_again " in message
        assert f"{__file__}:{send_welcome.__code__.co_firstlineno}" in message
        assert f"{__file__}:{send_welcome_again.__code__.co_firstlineno}" in message
        # The first registration stands.
        assert registry.get("tests.registry.welcome").func is send_welcome

    def test_duplicate_of_a_discovered_job(self) -> None:
        with pytest.raises(JobAlreadyRegistered, match=r"tests\.testapp\.jobs\.noop"):
            job("tests.noop")(send_welcome)
        assert registry.get("tests.noop") is testapp_jobs.noop

    def test_registering_the_same_function_again_is_fine(self, forget: Any) -> None:
        """A module imported twice (autodiscovery, then a test) must not break start-up."""
        forget("tests.registry.welcome")
        first = job("tests.registry.welcome")(send_welcome)
        second = job("tests.registry.welcome", queue="other")(send_welcome)
        assert registry.get("tests.registry.welcome") is second
        assert first.func is second.func

    def test_job_without_a_name_explains_itself(self) -> None:
        with pytest.raises(InvalidJobError, match=r'@job\("send_email"\)'):
            job(send_welcome)  # type: ignore[arg-type]

    def test_unregister(self) -> None:
        job("tests.registry.temporary")(send_welcome)
        registry.unregister("tests.registry.temporary")
        assert "tests.registry.temporary" not in registry
        registry.unregister("tests.registry.temporary")  # unknown names are ignored

    def test_unknown_name(self) -> None:
        with pytest.raises(UnknownJobError, match=r"tests\.registry\.missing") as info:
            registry.get("tests.registry.missing")
        assert "jobs.py" in str(info.value)

    def test_async_function_is_recognised(self, forget: Any) -> None:
        forget("tests.registry.async")

        async def fetch() -> int:
            return 1

        assert job("tests.registry.async")(fetch).is_async is True

    def test_repr_shows_where_the_function_lives(self) -> None:
        assert "tests.testapp.jobs.add" in repr(testapp_jobs.add)
        assert "'tests.add'" in repr(testapp_jobs.add)


class TestAutodiscovery:
    def test_testapp_jobs_module_was_discovered(self) -> None:
        for name in ("tests.noop", "tests.add", "tests.record", "tests.fail_always"):
            assert name in registry, f"{name} was not auto-discovered"
        assert registry.get("tests.add").func.__module__ == "tests.testapp.jobs"

    def test_discovered_in_a_fresh_process(self, spawn_django: Any) -> None:
        """Nothing in the test run imported jobs.py for Django: `django.setup()` did."""
        child = spawn_django(
            "import sys\n"
            "assert 'tests.testapp.jobs' in sys.modules\n"
            "from django_sqlqueue import registry\n"
            "print(','.join(registry.names()))\n"
        )
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        assert "tests.noop" in out.split(",")

    def test_autodiscover_can_be_turned_off(self, child_env: dict[str, str]) -> None:
        code = (
            "import sys, django\n"
            "from django.conf import settings\n"
            "import tests.settings as base\n"
            "values = {k: getattr(base, k) for k in dir(base) if k.isupper()}\n"
            "values['SQLQUEUE'] = {**base.SQLQUEUE, 'AUTODISCOVER': False}\n"
            "settings.configure(**values)\n"
            "django.setup()\n"
            "from django_sqlqueue import registry\n"
            "print(len(registry.names()), 'tests.testapp.jobs' in sys.modules)\n"
        )
        child = subprocess.run(
            [sys.executable, "-c", code],
            cwd=REPO_ROOT,
            env=child_env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert child.returncode == 0, child.stderr
        assert child.stdout.split() == ["0", "False"]


class TestOptionsDeclaredOnce:
    """`JobOptions` is the one declaration of what `@job` takes: the decorator's signature,
    its checks, what handlers expose and the docs' table all follow it."""

    def test_the_decorator_takes_exactly_the_options(self) -> None:
        fields = [f.name for f in dataclasses.fields(JobOptions)]
        parameters = list(inspect.signature(job).parameters)
        assert parameters == fields

    def test_every_option_is_documented(self) -> None:
        table = (REPO_ROOT / "docs" / "jobs.md").read_text()
        documented = set(re.findall(r"^\| `([a-z_]+)` \|", table, flags=re.MULTILINE))
        options = {f.name for f in dataclasses.fields(JobOptions)} - {"name"}
        assert options - documented == set()

    def test_options_are_frozen_and_replaceable(self, forget: Any) -> None:
        forget("tests.registry.welcome")
        handler = job("tests.registry.welcome", queue="mail", unique_for=30)(send_welcome)
        assert isinstance(handler.options, JobOptions)
        assert handler.options.unique_window == timedelta(seconds=30)
        with pytest.raises(dataclasses.FrozenInstanceError):
            handler.options.queue = "other"  # type: ignore[misc]
        again = dataclasses.replace(handler.options, queue="other")
        assert (again.queue, again.name) == ("other", "tests.registry.welcome")

    @pytest.mark.parametrize("window", [math.inf, math.nan, 1e20, -1, 0, True])
    def test_a_window_that_no_date_can_hold_names_the_job(self, window: Any) -> None:
        with pytest.raises(InvalidJobError, match=r"@job\('tests.registry.window'\): unique_for"):
            job("tests.registry.window", unique_for=window)
