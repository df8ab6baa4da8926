"""How a job's row reads as a TaskResult: the pure mapping in tasks.results, no database."""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

import pytest

from django_sqlqueue.attempts import AttemptOutcome
from django_sqlqueue.rows import ClaimedJob
from django_sqlqueue.runtime.runner import execute
from django_sqlqueue.states import Status
from django_sqlqueue.tasks.results import (
    FRAMEWORK_STATUS,
    current_run,
    exception_class_path,
    result_fields,
    run_after,
    status_after,
)

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=dt_timezone.utc)


class Broken(Exception):
    pass


def entry(
    attempt: int,
    outcome: str = "error",
    worker: str = "w1",
    error: str = "",
    tb: str = "",
    started: int = 0,
) -> dict[str, Any]:
    """A history entry as written before `exception` was recorded; times are T0 + minutes."""
    return {
        "attempt": attempt,
        "worker": worker,
        "started_at": (T0 + timedelta(minutes=started)).isoformat(),
        "finished_at": (T0 + timedelta(minutes=started, seconds=1)).isoformat(),
        "outcome": outcome,
        "error": error,
        "traceback": tb,
    }


def test_every_job_status_has_a_framework_status() -> None:
    assert dict(FRAMEWORK_STATUS) == {
        "waiting": "READY",
        "pending": "READY",
        "failed": "READY",
        "running": "RUNNING",
        "completed": "SUCCESSFUL",
        "dead": "FAILED",
        "cancelled": "FAILED",
    }
    assert set(FRAMEWORK_STATUS) == {status.value for status in Status}


class RaisingRunner:
    """A runner whose code raises `exc`: what execute() records for it."""

    timeout = None
    backoff = None

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def call(self, job: ClaimedJob, worker_id: str, control: Any) -> Any:
        raise self.exc

    def finished(self, job: ClaimedJob, attempt: Any) -> None:
        return None


class ReturningRunner(RaisingRunner):
    """A runner whose code returns `value`."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def call(self, job: ClaimedJob, worker_id: str, control: Any) -> Any:
        return self.value


def a_job() -> ClaimedJob:
    return ClaimedJob(
        id=1, name="x", queue="q", args=[], kwargs={}, attempts=1, max_attempts=3,
        priority=0, run_at=T0, created_at=T0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ({1, 2}, "return value cannot be stored: type set"),
        ({"a": [1, len]}, "return value['a'][1] cannot be stored: type builtin_function"),
        (float("nan"), "return value cannot be stored: nan"),
    ],
)
def test_a_return_value_that_cannot_be_stored_has_a_type_error_traceback(
    value: Any, problem: str
) -> None:
    """Recorded as the framework's immediate backend records a serialiser's failure: the
    TypeError's class path and its real traceback, not a bare sentence."""
    attempt = execute(a_job(), ReturningRunner(value), "w1")
    assert attempt.outcome is AttemptOutcome.BAD_RESULT
    assert attempt.exception == "builtins.TypeError"
    assert attempt.traceback.startswith("Traceback (most recent call last):\n")
    last = attempt.traceback.rstrip().splitlines()[-1]
    assert last.startswith("TypeError: The handler's ") and problem in last
    assert problem in attempt.error


def recorded_path(exc: BaseException) -> str:
    """The exception path the worker records when a handler raises `exc`."""
    return execute(a_job(), RaisingRunner(exc), "w1").exception


class TestExceptionClassPath:
    """The worker records the class of the exception that ended an attempt; results read it."""

    def test_builtin_exception(self) -> None:
        assert recorded_path(ValueError("bad value")) == "builtins.ValueError"

    def test_exception_of_a_module_is_module_qualified(self) -> None:
        assert recorded_path(Broken("x")) == f"{__name__}.Broken"

    def test_chained_exception_names_the_one_raised_last(self) -> None:
        try:
            try:
                raise KeyError("inner")
            except KeyError as exc:
                raise Broken("outer") from exc
        except Broken as outer:
            assert recorded_path(outer) == f"{__name__}.Broken"

    def test_message_lines_that_look_like_exceptions_are_not_mistaken(self) -> None:
        assert recorded_path(Broken("first line\nValueError: second line")).endswith(".Broken")

    @pytest.mark.skipif(sys.version_info < (3, 11), reason="ExceptionGroup is Python 3.11+")
    def test_exception_group(self) -> None:
        group = ExceptionGroup("group", [ValueError("x")])  # noqa: F821 - 3.11+
        assert recorded_path(group) == "builtins.ExceptionGroup"

    def test_results_read_the_recorded_path(self) -> None:
        recorded = {**entry(1, error="Broken: x"), "exception": "app.errors.Broken"}
        assert exception_class_path(recorded) == "app.errors.Broken"

    @pytest.mark.parametrize(
        ("outcome", "path"),
        [
            ("lost", "django_sqlqueue.exceptions.WorkerLost"),
            ("timeout", "django_sqlqueue.exceptions.JobTimeout"),
            ("retry", "django_sqlqueue.exceptions.Retry"),
            ("bad_result", "builtins.TypeError"),
        ],
    )
    def test_entries_without_a_recorded_path_are_named_by_outcome(
        self, outcome: str, path: str
    ) -> None:
        error = "Worker w1 stopped renewing its lease (it crashed, was killed or hung)"
        assert exception_class_path(entry(1, outcome=outcome, error=error)) == path

    def test_nothing_to_go_on(self) -> None:
        assert exception_class_path(entry(1, error="")) == "builtins.Exception"

    def test_named_paths_import(self) -> None:
        from django.utils.module_loading import import_string

        for outcome in ("lost", "timeout", "retry", "discard", "unknown", "bad_result"):
            cls = import_string(exception_class_path(entry(1, outcome=outcome)))
            assert issubclass(cls, BaseException)


class TestCurrentRun:
    def test_released_attempts_were_not_spent(self) -> None:
        history = [entry(1, "released"), entry(1, "error"), entry(2, "completed")]
        assert [e["outcome"] for e in current_run(history, 2)] == ["error", "completed"]

    def test_after_a_requeue_only_the_new_run_counts(self) -> None:
        history = [entry(1), entry(2), entry(3, "error"), entry(1, "completed", worker="w9")]
        assert current_run(history, 1) == [history[-1]]

    def test_no_attempts_no_entries(self) -> None:
        assert current_run([entry(1)], 0) == []


class TestResultFields:
    def test_freshly_enqueued(self) -> None:
        fields = result_fields(
            status="pending",
            attempts=0,
            history=[],
            enqueued_at=T0,
            last_started_at=None,
            finished_at=None,
        )
        assert fields.status == "READY"
        assert fields.enqueued_at == T0
        assert (fields.started_at, fields.finished_at, fields.last_attempted_at) == (None,) * 3
        assert (fields.errors, fields.worker_ids) == ([], [])

    def test_running_counts_the_attempt_in_progress(self) -> None:
        now = T0 + timedelta(minutes=5)
        fields = result_fields(
            status="running",
            attempts=2,
            history=[entry(1, error="Broken: x", worker="w1", started=1)],
            enqueued_at=T0,
            last_started_at=now,
            finished_at=None,
            running_worker="w2",
        )
        assert fields.status == "RUNNING"
        assert fields.worker_ids == ["w1", "w2"]
        assert len(fields.errors) == 1
        assert fields.started_at == T0 + timedelta(minutes=1)
        assert fields.last_attempted_at == now
        assert fields.finished_at is None

    def test_completed_after_a_retry(self) -> None:
        done = T0 + timedelta(minutes=9)
        history = [
            {
                **entry(1, error="Broken: x", tb="Traceback …\nBroken: x", worker="w1", started=1),
                "exception": f"{__name__}.Broken",
            },
            entry(2, "completed", worker="w2", started=3),
        ]
        fields = result_fields(
            status="completed",
            attempts=2,
            history=history,
            enqueued_at=T0,
            last_started_at=T0 + timedelta(minutes=3),
            finished_at=done,
            result={"ok": True},
        )
        assert fields.status == "SUCCESSFUL"
        assert fields.return_value == {"ok": True}
        assert fields.worker_ids == ["w1", "w2"]
        assert [e.exception_class_path for e in fields.errors] == [f"{__name__}.Broken"]
        assert "Broken: x" in fields.errors[0].traceback
        assert fields.started_at == T0 + timedelta(minutes=1)
        assert fields.last_attempted_at == T0 + timedelta(minutes=3)
        assert fields.finished_at == done

    def test_waiting_for_a_retry_is_ready_and_not_finished(self) -> None:
        fields = result_fields(
            status="failed",
            attempts=1,
            history=[entry(1, error="Broken: x")],
            enqueued_at=T0,
            last_started_at=T0,
            finished_at=None,
        )
        assert fields.status == "READY"
        assert fields.finished_at is None
        assert len(fields.errors) == len(fields.worker_ids) == 1

    @pytest.mark.parametrize("status", ["dead", "cancelled"])
    def test_dead_and_cancelled_are_failed(self, status: str) -> None:
        fields = result_fields(
            status=status,
            attempts=0 if status == "cancelled" else 1,
            history=[] if status == "cancelled" else [entry(1, error="Broken: x")],
            enqueued_at=T0,
            last_started_at=None,
            finished_at=T0 + timedelta(hours=1),
            result="ignored",
        )
        assert fields.status == "FAILED"
        assert fields.finished_at == T0 + timedelta(hours=1)
        assert fields.return_value is None

    def test_a_lost_attempt_reads_as_an_error_with_its_message(self) -> None:
        message = "Worker w1 stopped renewing its lease"
        fields = result_fields(
            status="dead",
            attempts=1,
            history=[entry(1, "lost", error=message)],
            enqueued_at=T0,
            last_started_at=T0,
            finished_at=T0,
        )
        assert fields.errors[0].exception_class_path.endswith(".WorkerLost")
        assert fields.errors[0].traceback == message


@pytest.mark.parametrize(
    ("outcome", "attempts", "expected"),
    [
        (AttemptOutcome.COMPLETED, 5, "completed"),
        (AttemptOutcome.ERROR, 1, "failed"),
        (AttemptOutcome.ERROR, 3, "dead"),
        (AttemptOutcome.DISCARD, 1, "dead"),
        (AttemptOutcome.UNKNOWN, 1, "dead"),
        (AttemptOutcome.BAD_RESULT, 1, "dead"),
    ],
)
def test_status_after(outcome: AttemptOutcome, attempts: int, expected: str) -> None:
    assert status_after(outcome, attempts, 3) == expected


def test_run_after_unless_run_at_is_the_enqueue_time() -> None:
    assert run_after(T0, T0) is None
    assert run_after(T0 + timedelta(seconds=1), T0) == T0 + timedelta(seconds=1)
    # A run_after in the past is kept: the result read back equals the one enqueued.
    assert run_after(T0 - timedelta(minutes=5), T0) == T0 - timedelta(minutes=5)
    assert run_after(T0 - timedelta(microseconds=1), T0) == T0 - timedelta(microseconds=1)
