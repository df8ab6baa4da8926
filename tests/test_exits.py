"""The one door out of `running` (databases/exits.py), on every database.

Every exit the state machine has is written through the vendor's `leave_running`, for one job
and for a batch; the history entry it writes is the one `attempts.entry_for` describes; and no
other code in the package writes a status away from `running`.
"""

from __future__ import annotations

import ast
import re
import typing
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import django_sqlqueue
from django_sqlqueue.attempts import ENTRY_FIELDS, AttemptEntry, AttemptOutcome, entry_for
from django_sqlqueue.databases import queue_database
from django_sqlqueue.exits import Exit, shape_of
from django_sqlqueue.models import Job
from django_sqlqueue.rows import ClaimedJob
from django_sqlqueue.states import (
    ABANDON,
    ALL_TRANSITIONS,
    CANCEL,
    CLAIM,
    COMPLETE,
    EXITS,
    FAIL,
    PARK,
    PARKED_OWNER,
    READY,
    RELEASE,
    REQUEUE,
    REWAIT,
    STOP,
    UNCLAIM,
    Status,
)

PACKAGE = Path(django_sqlqueue.__file__).parent
Claim = Callable[..., list[ClaimedJob]]

#: One example of every exit: (transition, target, keyword arguments of Exit).
EXAMPLES: list[tuple[Any, Status, dict[str, Any]]] = [
    (COMPLETE, Status.COMPLETED, {"outcome": AttemptOutcome.COMPLETED, "result": '{"n": 1}'}),
    (FAIL, Status.FAILED, {"outcome": AttemptOutcome.ERROR, "error": "boom", "retry": True}),
    (FAIL, Status.DEAD, {"outcome": AttemptOutcome.TIMEOUT, "error": "slow", "traceback": "T"}),
    (RELEASE, Status.PENDING, {"outcome": AttemptOutcome.RELEASED, "error": "bye", "retry": True}),
    (
        STOP,
        Status.CANCELLED,
        {"outcome": AttemptOutcome.CANCELLED, "error": "no", "exception": "x.Y"},
    ),
    (UNCLAIM, Status.PENDING, {}),
    (PARK, Status.PENDING, {"retry": True}),
]


def exit_of(transition: Any, status: Status, at: datetime, **given: Any) -> Exit:
    retry = given.pop("retry", False)
    return Exit(
        shape_of(transition, status),
        at,
        run_at=at + timedelta(seconds=30) if retry else None,
        **given,
    )


def rows(alias: str, ids: list[int]) -> dict[int, Job]:
    return {job.pk: job for job in Job.objects.using(alias).filter(pk__in=ids)}


class TestShapes:
    def test_every_fenced_transition_is_an_exit_and_only_those(self) -> None:
        assert set(EXITS) == {t for t in ALL_TRANSITIONS if Status.RUNNING in t.sources}
        for transition in EXITS:
            assert transition.sources == (Status.RUNNING,)
            for status in transition.targets:
                assert shape_of(transition, status).status == status
        covered = {(t.name, s) for t, s, _ in EXAMPLES}
        assert covered == {(t.name, s) for t in EXITS for s in t.targets}

    def test_anything_else_is_refused(self) -> None:
        with pytest.raises(ValueError, match="not an exit"):
            shape_of(CLAIM, Status.RUNNING)
        with pytest.raises(ValueError, match="not an exit"):
            shape_of(COMPLETE, Status.FAILED)

    def test_an_exit_says_what_its_shape_needs(self) -> None:
        now = timezone.now()
        with pytest.raises(ValueError, match="outcome"):
            Exit(shape_of(COMPLETE, Status.COMPLETED), now)
        with pytest.raises(ValueError, match="outcome"):
            Exit(shape_of(UNCLAIM, Status.PENDING), now, AttemptOutcome.RELEASED)
        with pytest.raises(ValueError, match="run_at"):
            Exit(shape_of(FAIL, Status.FAILED), now, AttemptOutcome.ERROR)

    def test_the_entry_definition_is_the_typed_entry(self) -> None:
        assert [field.key for field in ENTRY_FIELDS] == list(typing.get_type_hints(AttemptEntry))


@pytest.mark.django_db
class TestTheDoor:
    @pytest.mark.parametrize(("transition", "status", "given"), EXAMPLES, ids=lambda v: str(v))
    @pytest.mark.parametrize("size", [1, 3])
    def test_each_exit_writes_what_the_state_machine_says(
        self,
        make_job: Any,
        claim: Claim,
        alias: str,
        transition: Any,
        status: Status,
        given: dict[str, Any],
        size: int,
    ) -> None:
        made = [make_job() for _ in range(size)]
        claimed = claim("worker-a", limit=size)
        before = rows(alias, [job.pk for job in made])
        at = timezone.now()
        exit = exit_of(transition, status, at, **dict(given))

        written = queue_database(alias).leave_running(claimed, exit)

        assert written == {job.pk for job in made}
        shape = exit.shape
        for job in claimed:
            old, new = before[job.id], rows(alias, [job.id])[job.id]
            assert new.status == status
            assert new.lease_expires_at is None
            assert new.lease_owner == (PARKED_OWNER if transition is PARK else "")
            assert new.attempts == old.attempts - (1 if shape.unspent else 0)
            assert new.updated_at == at
            assert new.finished_at == (
                at if status in (Status.COMPLETED, Status.DEAD, Status.CANCELLED) else None
            )
            assert new.run_at == (exit.run_at if exit.run_at else old.run_at)
            if transition is COMPLETE:
                assert new.result == {"n": 1}
            assert new.last_error == (given.get("error", "") if transition in (FAIL, STOP) else "")
            if not shape.entry:
                assert new.history == old.history
                continue
            [entry] = new.history
            expected = entry_for(
                job,
                exit.outcome,
                old.started_at if shape.started else None,
                at,
                exit.error,
                exit.traceback,
                exit.exception,
            )
            assert set(entry) == set(expected)  # (jsonb keeps keys in an order of its own)
            for key in ("started_at", "finished_at"):
                value = entry.pop(key)
                wanted = expected.pop(key)  # type: ignore[misc]
                assert (value and datetime.fromisoformat(value)) == (
                    wanted and datetime.fromisoformat(wanted)
                )
            assert entry == expected

    def test_a_lost_lease_changes_nothing(self, make_job: Any, claim: Claim, alias: str) -> None:
        make_job(), make_job()
        claimed = claim("worker-a", limit=2)
        stale = [ClaimedJob(**{**vars(job), "attempts": job.attempts + 1}) for job in claimed]
        before = rows(alias, [job.id for job in claimed])
        for transition, status, given in EXAMPLES:
            exit = exit_of(transition, status, timezone.now(), **dict(given))
            assert queue_database(alias).leave_running(stale, exit) == set()
            assert queue_database(alias).leave_running(stale[:1], exit) == set()
        assert rows(alias, [job.id for job in claimed]) == before
        assert all(
            (r.status, r.lease_owner) == (Status.RUNNING, "worker-a")
            for r in rows(alias, [job.id for job in claimed]).values()
        )

    def test_a_batch_writes_exactly_the_jobs_it_still_holds(
        self, make_job: Any, claim: Claim, alias: str
    ) -> None:
        for _ in range(4):
            make_job()
        claimed = claim("worker-a", limit=4)
        # Two of them were taken away (recovered, as by a supervisor) and claimed again.
        Job.objects.using(alias).filter(pk__in=[claimed[1].id, claimed[3].id]).update(
            lease_owner="worker-b", attempts=2
        )
        exit = exit_of(COMPLETE, Status.COMPLETED, timezone.now(), outcome=AttemptOutcome.COMPLETED)
        assert queue_database(alias).leave_running(claimed, exit) == {claimed[0].id, claimed[2].id}
        stayed = rows(alias, [claimed[1].id, claimed[3].id])
        assert {(r.status, r.lease_owner) for r in stayed.values()} == {
            (Status.RUNNING, "worker-b")
        }

    def test_a_batch_without_entries_tells_its_rows_from_a_release(
        self, make_job: Any, claim: Claim, alias: str
    ) -> None:
        """An unclaim writes no history entry, and a row handed back by another way out of
        running (here a release, as recovery makes) looks like it but for its entry: the
        batch must not count that row as its own (MySQL reads rows back to tell)."""
        for _ in range(3):
            make_job()
        claimed = claim("worker-a", limit=3)
        released = exit_of(
            RELEASE, Status.PENDING, timezone.now(), outcome=AttemptOutcome.RELEASED, retry=True
        )
        assert queue_database(alias).leave_running([claimed[1]], released) == {claimed[1].id}
        unclaimed = exit_of(UNCLAIM, Status.PENDING, timezone.now())
        assert queue_database(alias).leave_running(claimed, unclaimed) == {
            claimed[0].id,
            claimed[2].id,
        }

    def test_one_exit_is_for_one_lease_owner(self, make_job: Any, claim: Claim, alias: str) -> None:
        make_job(), make_job()
        [a] = claim("worker-a")
        [b] = claim("worker-b")
        exit = exit_of(UNCLAIM, Status.PENDING, timezone.now())
        with pytest.raises(ValueError, match="one lease owner"):
            queue_database(alias).leave_running([a, b], exit)

    def test_what_watches_the_queries_sees_the_door_statements(
        self, make_job: Any, claim: Claim, alias: str
    ) -> None:
        """With DEBUG's query log (or an execute wrapper) on, exits go through Django's
        cursor, so the debug toolbar and tests see them; otherwise through the driver's."""
        make_job()
        [claimed] = claim("worker-a")
        with CaptureQueriesContext(connections[alias]) as captured:
            exit = exit_of(
                COMPLETE, Status.COMPLETED, timezone.now(), outcome=AttemptOutcome.COMPLETED
            )
            assert queue_database(alias).leave_running([claimed], exit) == {claimed.id}
        [statement] = [q["sql"] for q in captured.captured_queries if "UPDATE" in q["sql"]]
        assert "'running'" in statement and "history" in statement


#: SQL text that assigns a status: `status =` at the start of a SET list's item (the start of
#: the text, after SET, or after a comma), not a condition after WHERE or AND.
ASSIGNS_STATUS = re.compile(r"(^|\bSET |, )status = ")


def status_writes() -> list[tuple[str, int, str]]:
    """(module, line, what) of every place in the package that writes a job's `status`: ORM
    `.update(status=…)` calls, and SQL text that assigns `status =`."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if "migrations" in path.parts:
            continue
        module = path.relative_to(PACKAGE).as_posix()
        tree = ast.parse(path.read_text())
        parts = {
            id(part)
            for node in ast.walk(tree)
            if isinstance(node, ast.JoinedStr)
            for part in node.values
        }
        for node in ast.walk(tree):
            if id(node) in parts:
                continue  # read with its f-string
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "update"
                and "status" in {k.arg for k in node.keywords if k.arg}
            ):
                found.append((module, node.lineno, ast.unparse(node)))
                continue
            if isinstance(node, ast.JoinedStr):
                text = "".join(
                    v.value if isinstance(v, ast.Constant) else "{}" for v in node.values
                )
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            else:
                continue
            if ASSIGNS_STATUS.search(text.lstrip()):
                found.append((module, node.lineno, text))
    return found


def test_no_other_code_writes_a_status_away_from_running() -> None:
    """The one door: the claim writes `running`, staff operations write from the waiting and
    finished statuses they name; every change away from `running` is databases/exits.py's."""
    writes = status_writes()
    by_module: dict[str, list[str]] = {}
    for module, _, what in writes:
        by_module.setdefault(module, []).append(what)
    assert set(by_module) == {
        "databases/exits.py",
        "databases/claiming.py",
        "databases/dependencies.py",
        "operations.py",
    }, writes
    # The claim moves jobs into running (its one assignment), never out of it; the other
    # match is a condition (WAKE's parked jobs).
    claims = by_module["databases/claiming.py"]
    assert [c for c in claims if c.startswith("status = '{}', attempts = attempts + 1")]
    assert all(
        c.startswith("status = '{}', attempts = attempts + 1") or " AND " in c for c in claims
    )
    # Staff operations filter on the sources of their transitions, none of them running.
    assert len(by_module["operations.py"]) == 2
    for what in by_module["operations.py"]:
        assert "status__in=CANCEL.sources" in what or "status__in=REQUEUE.sources" in what
    assert Status.RUNNING not in CANCEL.sources + REQUEUE.sources
    # Workflows decide waiting jobs (READY, ABANDON) and put abandoned ones back (REWAIT).
    decisions = by_module["databases/dependencies.py"]
    assert len(decisions) == 3
    for what in decisions:
        assert any(f"status__in={t}.sources" in what for t in ("READY", "ABANDON", "REWAIT"))
    assert Status.RUNNING not in READY.sources + ABANDON.sources + REWAIT.sources
