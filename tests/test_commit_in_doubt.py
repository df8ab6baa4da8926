"""A commit in doubt: the enqueueing transaction committed, but its caller got a connection
error (the reply was lost: a failover, a network cut). Retrying with the same idempotency key
stores nothing more; retrying without one stores the job twice. docs/guarantees.md says so.

The cut is real: a proxy on loopback (tests/commit_cutter.py) passes the COMMIT to the real
server and drops the caller's connection before the reply. The caller is a child process
that reaches the test database through the proxy. PostgreSQL and MariaDB only: an SQLite
commit has no connection to lose."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection

from django_sqlqueue.models import Job
from tests.commit_cutter import CommitCutter

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor == "sqlite", reason="an SQLite commit has no wire"),
]

ENQUEUE_AND_RETRY = """
import json
from django.db import InterfaceError, OperationalError, connection, transaction
from tests.testapp.jobs import noop

key = {key!r} or None
first = "committed"
try:
    with transaction.atomic():
        noop.using(idempotency_key=key).enqueue(n=1)
except (OperationalError, InterfaceError) as exc:
    first = f"connection error: {{type(exc).__name__}}"
connection.close()
again = noop.using(idempotency_key=key).enqueue(n=1)
print(json.dumps({{"first": first, "deduplicated": again.deduplicated}}))
"""


@pytest.fixture
def cutter() -> Iterator[CommitCutter]:
    settings = connection.settings_dict
    with CommitCutter((settings["HOST"] or "127.0.0.1", int(settings["PORT"]))) as made:
        yield made


@pytest.mark.parametrize(
    ("key", "stored"), [("order-42-receipt", 1), ("", 2)], ids=["with a key", "without"]
)
def test_a_retry_after_a_commit_in_doubt(
    cutter: CommitCutter, spawn_django: Callable[..., Any], key: str, stored: int
) -> None:
    """The caller is told the commit failed, yet it committed: a retry with the same
    idempotency key finds that job and stores nothing; a plain retry stores a second."""
    if connection.vendor == "postgresql":
        through = {"PGHOST": "127.0.0.1", "PGPORT": str(cutter.port), "PGSSLMODE": "disable"}
    else:
        through = {"MYSQL_HOST": "127.0.0.1", "MYSQL_PORT": str(cutter.port)}
    cutter.armed.set()
    child = spawn_django(ENQUEUE_AND_RETRY.format(key=key), env=through)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, out + err
    assert cutter.cut.is_set(), "the proxy never saw the COMMIT"
    said = json.loads(out.strip().splitlines()[-1])
    assert said["first"].startswith("connection error")
    assert said["deduplicated"] is bool(key)
    assert Job.objects.filter(name="tests.noop").count() == stored
