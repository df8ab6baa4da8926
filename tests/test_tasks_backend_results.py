"""How a job's row reads as a TaskResult: the pure mapping in task_results, no database."""

from __future__ import annotations

import sys
import traceback
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

import pytest

from django_sqlqueue.states import Status
from django_sqlqueue.task_results import (
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


def formatted(exc: BaseException) -> str:
    """The traceback text the worker records for `exc`, raised for real."""
    try:
        raise exc
    except BaseException:
        return traceback.format_exc()


def entry(
    attempt: int,
    outcome: str = "error",
    worker: str = "w1",
    error: str = "",
    tb: str = "",
    started: int = 0,
) -> dict[str, Any]:
    """A history entry shaped as services.attempt_record writes it; times are T0 + minutes."""
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
        "pending": "READY",
        "failed": "READY",
        "running": "RUNNING",
        "completed": "SUCCESSFUL",
        "dead": "FAILED",
        "cancelled": "FAILED",
    }
    assert set(FRAMEWORK_STATUS) == {status.value for status in Status}


class TestExceptionClassPath:
    def test_builtin_exception(self) -> None:
        tb = formatted(ValueError("bad value"))
        assert exception_class_path(entry(1, error="ValueError: bad value", tb=tb)) == (
            "builtins.ValueError"
        )

    def test_exception_of_a_module_is_module_qualified(self) -> None:
        tb = formatted(Broken("x"))
        path = exception_class_path(entry(1, error="Broken: x", tb=tb))
        assert path == f"{__name__}.Broken"

    def test_chained_exception_names_the_one_raised_last(self) -> None:
        def chained() -> None:
            try:
                raise KeyError("inner")
            except KeyError as exc:
                raise Broken("outer") from exc

        try:
            chained()
        except Broken:
            tb = traceback.format_exc()
        assert "KeyError" in tb
        assert exception_class_path(entry(1, error="Broken: outer", tb=tb)).endswith(".Broken")

    def test_message_lines_that_look_like_exceptions_are_not_mistaken(self) -> None:
        tb = formatted(Broken("first line\nValueError: second line"))
        assert exception_class_path(entry(1, error="Broken: first line", tb=tb)).endswith(".Broken")

    @pytest.mark.skipif(sys.version_info < (3, 11), reason="ExceptionGroup is Python 3.11+")
    def test_exception_group_falls_back_to_the_recorded_name(self) -> None:
        tb = formatted(ExceptionGroup("group", [ValueError("x")]))  # noqa: F821 - 3.11+
        error = "ExceptionGroup: group (1 sub-exception)"
        assert exception_class_path(entry(1, error=error, tb=tb)) == "builtins.ExceptionGroup"

    @pytest.mark.parametrize(
        ("outcome", "path"),
        [
            ("lost", "django_sqlqueue.task_results.WorkerLost"),
            ("timeout", "django_sqlqueue.exceptions.JobTimeout"),
            ("retry", "django_sqlqueue.exceptions.Retry"),
            ("bad_result", "builtins.TypeError"),
        ],
    )
    def test_attempts_without_a_traceback_are_named_by_outcome(
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
            entry(1, error="Broken: x", tb=formatted(Broken("x")), worker="w1", started=1),
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
    ("kind", "goes_dead", "attempts", "expected"),
    [
        ("completed", False, 5, "completed"),
        ("error", False, 1, "failed"),
        ("error", False, 3, "dead"),
        ("discard", True, 1, "dead"),
    ],
)
def test_status_after(kind: str, goes_dead: bool, attempts: int, expected: str) -> None:
    assert status_after(kind, goes_dead, attempts, 3) == expected


def test_run_after_only_when_later_than_the_enqueue() -> None:
    assert run_after(T0, T0) is None
    assert run_after(T0 + timedelta(seconds=1), T0) == T0 + timedelta(seconds=1)
