"""Hostile input: each value either runs through a real worker unchanged, or is refused at
enqueue with an InvalidJobError that names the problem — never a failure later, in a worker.

Accepted values are run by a real `runworkers --burst` (which imports this module to get the
`hostile.*` handlers), and each handler returns what it received, so the test compares the
whole trip: enqueue → row → claim → handler → result → row. Handlers that misbehave — leak
memory, never return, ignore their timeout — are contained by the worker's own limits.
"""

from __future__ import annotations

import math
import os
import resource
import subprocess
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone

from django_sqlqueue import InvalidJobError, UnknownJobError, enqueue, job, operations
from django_sqlqueue.models import Job
from django_sqlqueue.states import PRIORITY_MAX, PRIORITY_MIN, Status
from tests.testapp.models import Execution

TEN_MB = 10 * 1024 * 1024
SQL = "'; DROP TABLE django_sqlqueue_job; --"
SQL_VARIANTS = [
    SQL,
    '"; DELETE FROM django_sqlqueue_job; --',
    "x' OR '1'='1",
    "`job`; TRUNCATE django_sqlqueue_job",
    "%s %(name)s %%",
    "\\'; SELECT pg_sleep(10); --",
]
LEAK_BYTES = 40 * 1024 * 1024
#: Objects a leaking handler keeps alive for the life of its process.
_leaked: list[bytearray] = []


@job("hostile.echo")
def echo(*args: Any, **kwargs: Any) -> dict[str, Any]:
    return {"args": list(args), "kwargs": kwargs}


@job("hostile.size")
def size(payload: str) -> int:
    return len(payload)


@job(SQL[:200])
def sql_named(value: str) -> str:
    return value


@job("hostile.deep_result", max_attempts=1)
def deep_result(depth: int) -> Any:
    return nested(depth)


@job("hostile.leak", takes_context=True)
def leak(context: Any) -> int:
    _leaked.append(bytearray(b"x") * LEAK_BYTES)  # filled, so its pages are resident
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    Execution.objects.create(
        job_id=context.job_id,
        attempt=context.attempt,
        worker_pid=os.getpid(),
        label=str(len(_leaked)),
    )
    return peak_kb


@job("hostile.spin", timeout=1, max_attempts=1)
def spin() -> None:
    while True:
        pass


@job("hostile.deaf", timeout=1, max_attempts=1)
def deaf() -> None:
    while True:
        try:
            time.sleep(60)
        except BaseException:  # swallows the worker's JobTimeout: the worst kind of handler
            continue


# ---------------------------------------------------------------------------- helpers


@pytest.fixture
def run_workers(
    transactional_db: None, spawn_django: Callable[..., subprocess.Popen[str]]
) -> Callable[..., str]:
    """Run `runworkers --burst ARGS` in a child that knows the `hostile.*` handlers."""

    def run(*args: str, timeout: float = 120) -> str:
        connections.close_all()  # the child must see committed rows only; no open snapshot
        child = spawn_django(
            f"""
            import tests.test_hostile_input  # registers the hostile.* handlers
            from django.core.management import call_command
            call_command("runworkers", "--burst", *{list(args)!r})
            """
        )
        try:
            _, err = child.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            child.kill()
            _, err = child.communicate()
            raise AssertionError(f"runworkers did not finish in {timeout} s:\n{err}") from None
        assert child.returncode == 0, f"runworkers exited {child.returncode}:\n{err}"
        return err

    return run


def refused(call: Callable[[], Any], *words: str) -> str:
    """The call raises InvalidJobError naming `words`, and stores nothing."""
    before = Job.objects.count()
    with pytest.raises(InvalidJobError) as raised:
        call()
    message = str(raised.value)
    for word in words:
        assert word in message, message
    assert Job.objects.count() == before
    return message


def finished(job_: Job) -> Job:
    job_.refresh_from_db()
    return job_


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


# ---------------------------------------------------------------------------- refused at enqueue


class TestRefusedAtEnqueue:
    pytestmark = pytest.mark.django_db

    @pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=repr)
    def test_nan_and_infinity(self, value: float) -> None:
        refused(lambda: echo.enqueue(value), "args[0]", "JSON cannot represent")
        refused(lambda: echo.enqueue(x={"deep": [value]}), "x['deep'][0]")

    @pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 10**100], ids=lambda v: f"int{v}")
    def test_integers_beyond_64_bits(self, value: int) -> None:
        refused(lambda: echo.enqueue(value), "args[0]", "64 bits")

    @pytest.mark.parametrize(
        "value",
        [b"\xff\xfe\x00binary", bytearray(b"\x80"), "lone \udcff surrogate", "\ud800"],
        ids=["bytes", "bytearray", "surrogate-escape", "lone-high-surrogate"],
    )
    def test_non_utf8_strings(self, value: Any) -> None:
        refused(lambda: echo.enqueue(value), "args[0]")
        refused(lambda: echo.enqueue(**{"key": {"nested": value}}), "key")

    def test_non_utf8_keyword_name(self) -> None:
        refused(lambda: echo.enqueue(**{"bad\udcffname": 1}), "keyword")

    def test_nesting_deeper_than_python_can_walk(self) -> None:
        refused(lambda: echo.enqueue(nested(100_000)), "nesting deeper than 30")

    def test_job_name_of_a_thousand_characters(self) -> None:
        refused(lambda: job("n" * 1000)(lambda: None), "Job name", "1000", "255")
        with pytest.raises(UnknownJobError, match="No job is registered"):
            enqueue("n" * 1000)

    @pytest.mark.parametrize(
        ("option", "words"),
        [
            ({"queue": "q" * 1000}, ("queue", "1000", "100")),
            ({"idempotency_key": "k" * 1000}, ("idempotency_key", "1000", "255")),
            ({"queue": "   "}, ("queue",)),
            ({"priority": PRIORITY_MAX + 1}, ("priority", str(PRIORITY_MAX + 1))),
            ({"priority": PRIORITY_MIN - 1}, ("priority", str(PRIORITY_MIN - 1))),
            ({"priority": 10**20}, ("priority",)),
            ({"priority": True}, ("priority", "bool")),
            ({"priority": 1.5}, ("priority", "float")),
            ({"max_attempts": 0}, ("max_attempts",)),
            ({"delay": timedelta(days=10**8)}, ("delay",)),
            ({"delay": math.inf}, ("delay",)),
            ({"delay": -1}, ("delay",)),
            ({"run_at": datetime(2030, 1, 1)}, ("naive",)),
            ({"run_at": "2030-01-01"}, ("run_at",)),
        ],
        ids=lambda value: repr(value)[:40] if isinstance(value, dict) else "",
    )
    def test_invalid_options(self, option: dict[str, Any], words: tuple[str, ...]) -> None:
        refused(lambda: echo.using(**option).enqueue(), *words)

    @pytest.mark.parametrize("name", ["mail\x00", "bad \udcff queue"], ids=["nul", "surrogate"])
    def test_unstorable_queue_names(self, name: str) -> None:
        refused(lambda: echo.using(queue=name).enqueue(), "queue")

    @pytest.mark.parametrize("key", ["key\x00", "bad \udcff key"], ids=["nul", "surrogate"])
    def test_unstorable_idempotency_keys(self, key: str) -> None:
        refused(lambda: echo.using(idempotency_key=key).enqueue(), "idempotency_key")

    def test_run_at_that_overflows_when_made_utc(self) -> None:
        """The last minute of year 9999 west of UTC is in year 10000 in UTC."""
        west = dt_timezone(timedelta(hours=-5))
        refused(
            lambda: echo.using(run_at=datetime(9999, 12, 31, 23, tzinfo=west)).enqueue(), "run_at"
        )


# ---------------------------------------------------------------------------- accepted, run

UTC = dt_timezone.utc
ROUND_TRIPS: list[tuple[str, list[Any], dict[str, Any]]] = [
    ("sql-in-args", SQL_VARIANTS, {v[:20]: v for v in SQL_VARIANTS}),
    ("int64-bounds", [2**63 - 1, -(2**63)], {"max": 2**63 - 1, "min": -(2**63)}),
    ("floats", [9.999e15, -9.999e15, 5e-324, 0.1, -0.0], {"tiny": 1e-300}),
    (
        "unicode",
        ["emoji 😀🎉", "אבג עברית", "中文", "e\u0301", "\u200b\ufeff"],
        {"ключ": "значение"},
    ),
    ("control-characters", ["\t\n\r\x01\x1f\x7f", "\\u0000 as text"], {"quote": "'\"`"}),
    # The deepest that fits once echo wraps it in {"args": [...]}: 30 levels in all.
    ("nested-28", [nested(27)], {"nested": nested(27)}),
    ("wide", [list(range(10_000))], {f"k{i}": i for i in range(2_000)}),
    ("long-keyword", [], {"k" * 1000: "v" * 1000}),
    ("empty", [], {}),
]


class TestAcceptedInputRunsThroughAWorker:
    def test_round_trips(self, run_workers: Callable[..., str]) -> None:
        jobs = {name: echo.enqueue(*args, **kwargs) for name, args, kwargs in ROUND_TRIPS}
        run_workers("-n", "2")
        for name, args, kwargs in ROUND_TRIPS:
            done = finished(jobs[name])
            assert done.status == Status.COMPLETED, (name, done.last_error)
            assert done.result == {"args": args, "kwargs": kwargs}, name
            assert done.args == args and done.kwargs == kwargs, name

    def test_ten_megabyte_payload(self, run_workers: Callable[..., str], settings) -> None:
        """Over MAX_ARGUMENTS_BYTES (1 MiB by default) it is refused; raised, it runs."""
        payload = "x" * (TEN_MB - 7) + "😀ünï"
        refused(lambda: size.enqueue(payload), "MAX_ARGUMENTS_BYTES", str(1024 * 1024))
        settings.SQLQUEUE = {**settings.SQLQUEUE, "MAX_ARGUMENTS_BYTES": 2 * TEN_MB}
        big = size.enqueue(payload)
        run_workers()
        done = finished(big)
        assert (done.status, done.result) == (Status.COMPLETED, len(payload)), done.last_error

    def test_sql_looking_names_queues_and_keys(self, run_workers: Callable[..., str]) -> None:
        queue = "q'; DROP TABLE django_sqlqueue_job; --"
        first = sql_named.using(queue=queue, idempotency_key=SQL).enqueue(SQL)
        again = sql_named.using(queue=queue, idempotency_key=SQL).enqueue("other")
        assert again.deduplicated and again.pk == first.pk
        by_name = enqueue(SQL[:200], value="by name")
        run_workers("--queues", queue)
        done = finished(first)
        assert (done.status, done.result, done.queue) == (Status.COMPLETED, SQL, queue)
        assert finished(by_name).status == Status.PENDING  # another queue: not this worker's
        assert Job.objects.filter(name=SQL[:200]).count() == 2  # the table is still there

    def test_queue_name_with_a_comma_is_refused_or_selectable(
        self, run_workers: Callable[..., str]
    ) -> None:
        try:
            listed = echo.using(queue="mail,urgent").enqueue()
        except InvalidJobError as exc:
            assert "queue" in str(exc)
            return
        run_workers("--queues", "mail,urgent")
        assert finished(listed).status == Status.COMPLETED

    def test_priorities_at_the_bounds_run_in_order(self, run_workers: Callable[..., str]) -> None:
        low = echo.using(priority=PRIORITY_MIN).enqueue("low")
        high = echo.using(priority=PRIORITY_MAX).enqueue("high")
        middle = echo.using(priority=0).enqueue("middle")
        run_workers("-n", "1", "--batch-size", "1")
        started = [finished(j).started_at for j in (high, middle, low)]
        assert all(finished(j).status == Status.COMPLETED for j in (high, middle, low))
        assert started == sorted(started)

    def test_run_at_far_in_the_past_and_future(self, run_workers: Callable[..., str]) -> None:
        past = echo.using(run_at=datetime(1000, 1, 1, tzinfo=UTC)).enqueue("past")
        future_at = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC)
        future = echo.using(run_at=future_at).enqueue("future")
        run_workers()
        assert finished(past).status == Status.COMPLETED
        waiting = finished(future)
        assert (waiting.status, waiting.run_at) == (Status.PENDING, future_at)
        operations.run_now_many([future.pk])
        run_workers()
        assert finished(future).status == Status.COMPLETED


class TestDeepNesting:
    DEPTH = 40

    def test_deep_argument_runs_or_is_refused_at_enqueue(
        self, run_workers: Callable[..., str]
    ) -> None:
        try:
            deep = echo.enqueue(nested(self.DEPTH))
        except InvalidJobError as exc:
            assert "args[0]" in str(exc)
            return
        run_workers()
        assert finished(deep).status == Status.COMPLETED

    def test_deep_result_completes_or_fails_at_once(self, run_workers: Callable[..., str]) -> None:
        """Never 'lost': the worker that ran the job knows why it could not be recorded."""
        deep = deep_result.enqueue(self.DEPTH)
        run_workers(timeout=60)
        done = finished(deep)
        if done.status == Status.COMPLETED:
            assert done.result == nested(self.DEPTH)
        else:
            assert done.status == Status.DEAD, done.status
            assert done.history[-1]["outcome"] == "bad_result", done.history


# ---------------------------------------------------------------------------- misbehaving handlers


def test_leaking_handler_is_recycled_by_max_jobs(run_workers: Callable[..., str]) -> None:
    """Each job leaks 40 MB that its process never frees; --max-jobs 3 replaces the process
    after three jobs, so no process ever holds more than three jobs' worth."""
    jobs = [leak.enqueue() for _ in range(7)]
    run_workers("-n", "1", "--max-jobs", "3")
    assert all(finished(j).status == Status.COMPLETED for j in jobs)
    runs = list(Execution.objects.order_by("id").values_list("worker_pid", "label"))
    pids = [pid for pid, _ in runs]
    assert len(set(pids)) == 3, runs  # 3 + 3 + 1 jobs
    assert max(int(leaked) for _, leaked in runs) == 3
    # Peak memory of each process (kB): three leaks at most, plus the process itself.
    peaks_mb = [finished(j).result / 1024 for j in jobs]
    assert max(peaks_mb) < 3 * LEAK_BYTES / 2**20 + 150, peaks_mb


def test_handler_that_never_returns_is_stopped_by_its_timeout(
    run_workers: Callable[..., str],
) -> None:
    spinning = spin.enqueue()
    deaf_job = deaf.enqueue()
    after = echo.enqueue("after")
    log = run_workers("-n", "1", timeout=90)
    # Each stopped by its 1 s timeout (the deaf one sleeps 60 s at a time, forever): the
    # spinning one interrupted, the deaf one with its process.
    spun = finished(spinning)
    assert spun.status == Status.DEAD and "Timed out after 1 s" in spun.last_error
    assert [entry["outcome"] for entry in spun.history] == ["timeout"], spun.history
    deafened = finished(deaf_job)
    assert deafened.status == Status.DEAD
    assert "did not stop" in deafened.last_error
    assert [entry["outcome"] for entry in deafened.history] == ["timeout"], deafened.history
    assert "ignored its timeout" in log  # its process was replaced
    assert finished(after).status == Status.COMPLETED  # the queue went on


# ---------------------------------------------------------------------------- one key, one job


class TestDistinctStringsStayDistinct:
    """Keys and queue names are compared exactly, as Python compares them, on every database."""

    pytestmark = pytest.mark.django_db

    @pytest.mark.parametrize(
        ("first", "second"),
        [("key", "KEY"), ("key", "key "), ("resume", "résumé")],
        ids=["case", "trailing-space", "accents"],
    )
    def test_idempotency_keys(self, first: str, second: str) -> None:
        one = echo.using(idempotency_key=first).enqueue(1)
        two = echo.using(idempotency_key=second).enqueue(2)
        assert not two.deduplicated
        assert one.pk != two.pk

    def test_queue_names(self, claim: Callable[..., list[Any]]) -> None:
        upper = echo.using(queue="MAIL").enqueue()
        assert claim("worker", queues=["mail"], now=timezone.now() + timedelta(seconds=1)) == []
        assert finished(upper).status == Status.PENDING
