"""An idempotency key never creates a second job, even when two processes race for it."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from django.db import connections, transaction

from django_sqlqueue import operations
from django_sqlqueue.models import Job
from tests.testapp.jobs import add, noop
from tests.testapp.models import Order

pytestmark = pytest.mark.django_db


class TestOneProcess:
    def test_second_enqueue_returns_the_first_job(self, alias: str) -> None:
        first = noop.using(idempotency_key="welcome-1").enqueue(to="a@example.com")
        second = noop.using(idempotency_key="welcome-1").enqueue(to="b@example.com")

        assert first.deduplicated is False
        assert second.deduplicated is True
        assert second.pk == first.pk
        assert second.kwargs == {"to": "a@example.com"}, "the stored job is returned as is"
        assert Job.objects.using(alias).count() == 1

    def test_other_keys_and_no_key_are_independent(self, alias: str) -> None:
        a = noop.using(idempotency_key="a").enqueue()
        b = noop.using(idempotency_key="b").enqueue()
        plain_1 = noop.enqueue()
        plain_2 = noop.enqueue()
        assert len({a.pk, b.pk, plain_1.pk, plain_2.pk}) == 4
        assert not any(job.deduplicated for job in (a, b, plain_1, plain_2))

    def test_the_key_is_global_across_job_names(self, alias: str) -> None:
        first = noop.using(idempotency_key="shared").enqueue()
        second = add.using(idempotency_key="shared").enqueue(1, 2)
        assert second.deduplicated is True
        assert second.pk == first.pk
        assert second.name == "tests.noop"
        assert Job.objects.using(alias).count() == 1

    def test_a_finished_job_still_holds_its_key(self, alias: str) -> None:
        first = noop.using(idempotency_key="done").enqueue()
        Job.objects.using(alias).filter(pk=first.pk).update(status="completed")
        again = noop.using(idempotency_key="done").enqueue()
        assert again.deduplicated is True
        assert again.pk == first.pk
        assert again.status == "completed"

    def test_a_purged_job_frees_its_key(self, alias: str) -> None:
        first = noop.using(idempotency_key="purged").enqueue()
        operations.cancel_many([first.pk])
        assert operations.purge(operations.purgeable()) == 1
        again = noop.using(idempotency_key="purged").enqueue()
        assert again.deduplicated is False
        assert again.pk != first.pk

    def test_the_same_key_twice_in_one_transaction(self, alias: str) -> None:
        with transaction.atomic(using=alias):
            first = noop.using(idempotency_key="tx").enqueue()
            second = noop.using(idempotency_key="tx").enqueue()
        assert (second.pk, second.deduplicated) == (first.pk, True)
        assert Job.objects.using(alias).count() == 1


@pytest.mark.django_db(transaction=True)
def test_a_duplicate_leaves_the_callers_transaction_usable(alias: str) -> None:
    """The failed INSERT is rolled back to a savepoint; the caller's other writes commit."""
    noop.using(idempotency_key="welcome-7").enqueue()
    with transaction.atomic(using=alias):
        Order.objects.using(alias).create(reference="before")
        assert noop.using(idempotency_key="welcome-7").enqueue().deduplicated
        Order.objects.using(alias).create(reference="after")
    assert sorted(Order.objects.using(alias).values_list("reference", flat=True)) == [
        "after",
        "before",
    ]
    assert Job.objects.using(alias).count() == 1


# A child process: wait at a file barrier, then enqueue under the key inside a transaction that
# stays open for HOLD seconds, so the other child's enqueue runs while this one is uncommitted.
RACER = """
import json, os, sys, time
from pathlib import Path

from django.db import transaction

from django_sqlqueue import registry
from django_sqlqueue.models import Job

barrier = Path(os.environ["BARRIER"])
me = os.environ["CHILD"]
hold = float(os.environ["HOLD"])
Job.objects.exists()  # connect before the race, so connecting does not decide it
(barrier / f"{me}.ready").touch()
deadline = time.monotonic() + 60
while not (barrier / "go").exists():
    if time.monotonic() > deadline:
        sys.exit("never got the go signal")
    time.sleep(0.001)
started = time.time()
with transaction.atomic():
    job = registry.get("tests.noop").using(idempotency_key=os.environ["KEY"]).enqueue(child=me)
    enqueued = time.time()
    time.sleep(hold)
committed = time.time()
print(json.dumps({
    "child": me, "id": job.pk, "deduplicated": job.deduplicated,
    "started": started, "enqueued": enqueued, "committed": committed,
}))
"""


def wait_for(path: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} did not appear within {timeout}s")
        time.sleep(0.01)


def finish(child: Any, timeout: float = 90) -> dict[str, Any]:
    out, err = child.communicate(timeout=timeout)
    assert child.returncode == 0, f"child failed:\n{err}"
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
@pytest.mark.parametrize("racers", [2, 3])
def test_concurrent_enqueue_from_processes_stores_one_job(
    alias: str, spawn_django: Any, tmp_path: Path, racers: int
) -> None:
    hold = 1.0
    names = [f"racer-{n}" for n in range(racers)]
    children = [
        spawn_django(
            RACER,
            env={"BARRIER": str(tmp_path), "CHILD": name, "HOLD": str(hold), "KEY": "race-1"},
        )
        for name in names
    ]
    for name in names:
        wait_for(tmp_path / f"{name}.ready")
    (tmp_path / "go").touch()
    results = [finish(child) for child in children]

    rows = list(Job.objects.using(alias).filter(idempotency_key="race-1"))
    assert len(rows) == 1
    assert {result["id"] for result in results} == {rows[0].pk}
    winners = [result for result in results if not result["deduplicated"]]
    assert len(winners) == 1, results
    assert rows[0].kwargs == {"child": winners[0]["child"]}
    # The race was real: every transaction began before the winner committed, and the
    # others' enqueue had to wait for that commit to learn the key was taken.
    winner = winners[0]
    assert all(result["started"] < winner["committed"] for result in results), results
    for loser in results:
        if loser is not winner:
            assert loser["enqueued"] >= winner["committed"] - 0.05, results


# The first holder of the key rolls back: the waiting enqueue must then store its own job.
HOLDER = """
import os, time
from pathlib import Path

from django.db import transaction

from django_sqlqueue import registry

barrier = Path(os.environ["BARRIER"])
try:
    with transaction.atomic():
        registry.get("tests.noop").using(idempotency_key=os.environ["KEY"]).enqueue(child="holder")
        (barrier / "holder.inserted").touch()
        deadline = time.monotonic() + 60
        while not (barrier / "rollback").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        raise RuntimeError("roll back")
except RuntimeError:
    print("rolled back")
"""

# The waiter names its database session in `waiter.enqueuing` just before the enqueue sends
# its first statement; one of them waits for the holder's row (SQLite: its BEGIN IMMEDIATE).
WAITER = """
import json, os, time
from pathlib import Path

from django.db import connection

from django_sqlqueue import registry
from django_sqlqueue.models import Job

barrier = Path(os.environ["BARRIER"])
Job.objects.exists()
session = {"postgresql": "SELECT pg_backend_pid()", "mysql": "SELECT CONNECTION_ID()"}
if connection.vendor in session:
    with connection.cursor() as cursor:
        cursor.execute(session[connection.vendor])
        me = cursor.fetchone()[0]
else:
    me = os.getpid()  # SQLite waits in this process, in its busy handler


def announce(execute, sql, params, many, context):
    if not (barrier / "waiter.enqueuing").exists():
        (barrier / "waiter.session").write_text(str(me))
        (barrier / "waiter.session").rename(barrier / "waiter.enqueuing")  # whole, at once
    return execute(sql, params, many, context)


with connection.execute_wrapper(announce):
    job = registry.get("tests.noop").using(idempotency_key=os.environ["KEY"]).enqueue(
        child="waiter"
    )
print(json.dumps({"id": job.pk, "deduplicated": job.deduplicated, "enqueued": time.time()}))
"""


def poll_interval(alias: str) -> float:
    """How long to wait between two `blocked` reads. MariaDB answers INNODB_TRX from a cache
    it refreshes only when the last read is over 0.1 s old: reads closer together than that
    would see the table as it was at the first read for ever (met in CI: the waiter sat in
    LOCK WAIT for 60 s while every read showed only the holder)."""
    return 0.15 if connections[alias].vendor == "mysql" else 0.01


def blocked(alias: str, session: int) -> bool:
    """Whether the waiter's session waits for a lock: as the server reports it (PostgreSQL,
    MySQL), or as a process asleep in SQLite's busy handler."""
    vendor = connections[alias].vendor
    if vendor == "sqlite":
        stat = Path(f"/proc/{session}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] == "S"
    query = {
        "postgresql": "SELECT 1 FROM pg_stat_activity WHERE pid = %s AND wait_event_type = 'Lock'",
        "mysql": "SELECT 1 FROM information_schema.INNODB_TRX "
        "WHERE trx_mysql_thread_id = %s AND trx_state = 'LOCK WAIT'",
    }[vendor]
    with connections[alias].cursor() as cursor:
        cursor.execute(query, [session])
        return cursor.fetchone() is not None


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_waiting_enqueue_stores_its_job_when_the_holder_rolls_back(
    alias: str, spawn_django: Any, tmp_path: Path
) -> None:
    env = {"BARRIER": str(tmp_path), "KEY": "race-2"}
    holder = spawn_django(HOLDER, env=env)
    wait_for(tmp_path / "holder.inserted")
    waiter = spawn_django(WAITER, env=env)
    wait_for(tmp_path / "waiter.enqueuing")
    session = int((tmp_path / "waiter.enqueuing").read_text())
    deadline = time.monotonic() + 60
    while not blocked(alias, session):  # behind the holder's uncommitted row
        assert time.monotonic() < deadline, "the waiter's enqueue never waited for the holder"
        time.sleep(poll_interval(alias))
    rolled_back_at = time.time()
    (tmp_path / "rollback").touch()

    out, err = holder.communicate(timeout=90)
    assert holder.returncode == 0, err
    assert "rolled back" in out
    result = finish(waiter)

    rows = list(Job.objects.using(alias).filter(idempotency_key="race-2"))
    assert len(rows) == 1
    assert rows[0].kwargs == {"child": "waiter"}
    assert result == {**result, "id": rows[0].pk, "deduplicated": False}
    assert result["enqueued"] >= rolled_back_at, "the waiter did not wait for the holder"
