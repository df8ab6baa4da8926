"""django_sqlqueue.testing, as a project's tests use it: run_jobs() runs due jobs in-process
through the worker's own code, and the assertions read what was enqueued.

Each test runs twice where it matters: inside the test's transaction (pytest-django's default,
as a Django TestCase) and in autocommit (`transaction=True`), the two ways projects test.
tests/test_testing_project.py runs a small project's own test suite with the pytest plugin.
"""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.utils import timezone

from django_sqlqueue import run_now
from django_sqlqueue.models import Job
from django_sqlqueue.signals import job_completed
from django_sqlqueue.states import Status
from django_sqlqueue.testing import (
    CapturedJobs,
    assert_enqueued,
    assert_not_enqueued,
    captured_jobs,
    enqueued_jobs,
    run_jobs,
)
from tests.tasksapp.tasks_settings import TASKS
from tests.testapp.jobs import add, fail_always, increment, noop, record, retry, too_slow
from tests.testapp.models import Counter, Execution, Order

both_modes = pytest.mark.parametrize(
    "mode",
    [
        pytest.param("in a transaction", marks=pytest.mark.django_db),
        pytest.param("autocommit", marks=pytest.mark.django_db(transaction=True)),
    ],
)


@both_modes
class TestRunJobs:
    def test_runs_due_jobs_and_returns_them(self, mode: str) -> None:
        first = add.enqueue(1, 2)
        second = record.enqueue(label="hello")
        ran = run_jobs()
        assert [job.pk for job in ran] == [first.pk, second.pk]
        assert [job.status for job in ran] == [Status.COMPLETED, Status.COMPLETED]
        assert ran[0].result == 3
        assert Execution.objects.get().label == "hello"
        assert run_jobs() == []

    def test_a_failure_is_recorded_and_its_retry_scheduled(self, mode: str) -> None:
        job = fail_always.enqueue()
        [ran] = run_jobs()
        assert ran.pk == job.pk
        assert (ran.status, ran.attempts) == (Status.FAILED, 1)
        assert "boom on attempt 1" in ran.last_error
        assert ran.run_at > timezone.now() - timedelta(seconds=1)
        assert "ValueError" in ran.history[0]["traceback"]
        assert run_jobs() == [], "a retry with backoff is not due yet"
        run_now(job)
        [again] = run_jobs()
        assert again.attempts == 2

    def test_retries_that_are_due_at_once_run_until_the_job_is_dead(self, mode: str) -> None:
        job = retry.enqueue(delay=0)  # max_attempts=3
        [ran] = run_jobs()
        assert (ran.pk, ran.status, ran.attempts) == (job.pk, Status.DEAD, 3)

    def test_queue_and_name_limit_the_run(self, mode: str) -> None:
        mail = add.using(queue="mail").enqueue(1, 1)
        reports = add.using(queue="reports").enqueue(2, 2)
        other = noop.using(queue="mail").enqueue()
        assert [job.pk for job in run_jobs(queue="mail", name="tests.add")] == [mail.pk]
        untouched = {job.pk: (job.status, job.attempts) for job in Job.objects.all()}
        assert untouched[reports.pk] == untouched[other.pk] == (Status.PENDING, 0)
        assert [job.pk for job in run_jobs(name=["tests.noop"])] == [other.pk]
        assert [job.pk for job in run_jobs(queue=["reports", "mail"])] == [reports.pk]

    def test_a_job_enqueued_by_a_job_runs_in_the_same_call(
        self, mode: str, register_job: Any
    ) -> None:
        chain = register_job("tests.helpers.chain", lambda: add.enqueue(20, 22).pk)
        chain.enqueue()
        ran = run_jobs()
        assert [job.name for job in ran] == ["tests.helpers.chain", "tests.add"]
        assert ran[1].result == 42

    def test_max_jobs(self, mode: str) -> None:
        add.enqueue_many([{"a": i, "b": i} for i in range(5)])
        assert len(run_jobs(max_jobs=2)) == 2
        assert len(enqueued_jobs("tests.add")) == 3

    def test_a_timeout_interrupts_the_handler(self, mode: str) -> None:
        too_slow.enqueue()  # timeout=1, sleeps 30 s
        [ran] = run_jobs()
        assert ran.status == Status.FAILED
        assert "Timed out after 1 s" in ran.last_error

    def test_signals_are_sent(self, mode: str) -> None:
        heard: list[Any] = []

        def receiver(sender: Any, job: Any, result: Any, **kwargs: Any) -> None:
            heard.append(result)

        job_completed.connect(receiver, dispatch_uid="test_testing_helpers")
        try:
            add.enqueue(2, 3)
            run_jobs()
        finally:
            job_completed.disconnect(dispatch_uid="test_testing_helpers")
        assert heard == [5]

    def test_an_atomic_job_commits_its_writes_with_its_completion(self, mode: str) -> None:
        Counter.objects.create(name="atomic", value=0)
        increment.enqueue()
        [ran] = run_jobs()
        assert ran.status == Status.COMPLETED
        assert Counter.objects.get(name="atomic").value == 1


@pytest.mark.django_db
def test_a_database_error_in_a_handler_leaves_the_test_transaction_usable(
    register_job: Any,
) -> None:
    """A failed statement inside the test's atomic block makes Django refuse every later
    query (TransactionManagementError) on every database: without a savepoint per attempt,
    nothing after the failing job could run, the test's own queries included."""

    def broken() -> None:
        Order.objects.create(reference="kept?")
        Order.objects.create(reference=None)  # NOT NULL: IntegrityError

    register_job("tests.helpers.broken", broken).enqueue()
    later = add.enqueue(1, 1)
    ran = run_jobs()
    assert [job.status for job in ran] == [Status.FAILED, Status.COMPLETED]
    assert "IntegrityError" in ran[0].last_error
    assert Job.objects.get(pk=later.pk).result == 2
    assert not Order.objects.exists(), "the failed attempt's writes were rolled back"
    with pytest.raises(IntegrityError), transaction.atomic():
        Order.objects.create(reference=None)


@pytest.mark.django_db
def test_run_jobs_wants_the_main_thread() -> None:
    errors: list[BaseException] = []

    def target() -> None:
        try:
            run_jobs()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    assert len(errors) == 1 and "main thread" in str(errors[0])


@pytest.mark.django_db
class TestAssertions:
    def test_arguments_match_by_position_or_keyword(self) -> None:
        add.enqueue(1, 2)
        assert assert_enqueued("tests.add", a=1).args == [1, 2]
        assert_enqueued("tests.add", 1, b=2)
        assert_enqueued("tests.add")
        record.enqueue("x")  # a context handler: bound without its context
        assert_enqueued("tests.record", label="x", sleep=0.0)
        noop.enqueue(1, colour="red", size=2)  # *args, **kwargs
        assert_enqueued("tests.noop", colour="red")

    def test_a_mismatch_lists_the_jobs_of_that_name(self) -> None:
        job = add.enqueue(1, 2)
        with pytest.raises(AssertionError) as info:
            assert_enqueued("tests.add", a=5)
        message = str(info.value)
        assert "No job tests.add(a=5) was enqueued" in message
        assert f"job {job.pk} tests.add(1, 2) [pending]" in message

    def test_an_unknown_name_lists_the_names_there_are(self) -> None:
        add.enqueue(1, 2)
        with pytest.raises(AssertionError, match=r"No job named 'tests.ad'.*there: tests.add"):
            assert_enqueued("tests.ad")

    def test_only_waiting_jobs_count(self) -> None:
        add.enqueue(1, 2)
        run_jobs()
        assert_not_enqueued("tests.add")
        with pytest.raises(AssertionError):
            assert_enqueued("tests.add")

    def test_assert_not_enqueued_names_what_it_found(self) -> None:
        add.enqueue(1, 2)
        assert_not_enqueued("tests.add", a=3)
        with pytest.raises(AssertionError, match=r"tests.add\(1, 2\)"):
            assert_not_enqueued("tests.add", a=1)

    def test_arguments_that_do_not_fit_the_handler_are_a_mistake_in_the_test(self) -> None:
        with pytest.raises(AssertionError, match="do not fit"):
            assert_enqueued("tests.add", c=1)


@pytest.mark.django_db
class TestCapturedJobs:
    def test_the_jobs_of_the_block_only(self) -> None:
        before = add.enqueue(0, 0)
        with captured_jobs() as captured:
            add.enqueue(1, 2)
            noop.enqueue_many([{"n": 1}, {"n": 2}])
            with pytest.raises(RuntimeError), transaction.atomic():
                add.enqueue(9, 9)
                raise RuntimeError("rolled back: never enqueued")
        add.enqueue(3, 4)
        assert captured.names() == ["tests.add", "tests.noop", "tests.noop"]
        assert before.pk not in [job.pk for job in captured]
        assert len(captured.filter("tests.noop", n=2)) == 1
        captured.assert_enqueued("tests.add", 1, 2)
        captured.assert_not_enqueued("tests.add", 9, 9)
        captured.assert_not_enqueued("tests.add", 3, 4)

    @pytest.mark.skipif(not TASKS, reason="no Tasks framework installed")
    def test_django_tasks_are_captured_and_run(self) -> None:
        from tests.tasksapp import tasks

        with captured_jobs() as captured:
            result = tasks.add.enqueue(1, 2)
        job = captured.assert_enqueued("tests.tasksapp.tasks.add", a=1, b=2)
        assert job.reference == result.id
        captured.assert_not_enqueued("tests.tasksapp.tasks.add", b=3)
        [ran] = run_jobs()
        assert (ran.status, ran.result) == (Status.COMPLETED, 3)

    def test_captured_jobs_keep_counting_after_they_ran(self) -> None:
        with captured_jobs() as captured:
            add.enqueue(1, 2)
            run_jobs()
        assert captured[0].status == Status.COMPLETED
        captured.assert_enqueued("tests.add", a=1)


@pytest.mark.django_db
def test_the_pytest_plugin_fixtures(sqlqueue: Any, captured_jobs: CapturedJobs) -> None:
    """The plugin is registered through the package's pytest11 entry point."""
    add.enqueue(1, 2)
    sqlqueue.assert_enqueued("tests.add", a=1, b=2)
    assert [job.result for job in sqlqueue.run_jobs()] == [3]
    assert captured_jobs.names() == ["tests.add"]
    assert sqlqueue.jobs[0].status == Status.COMPLETED


@pytest.mark.django_db
def test_job_names_are_query_parameters() -> None:
    job = add.enqueue(1, 2)
    hostile = "x'); DROP TABLE django_sqlqueue_job; --"
    assert [ran.pk for ran in run_jobs(name=[hostile, "tests.add"])] == [job.pk]
    assert Job.objects.filter(pk=job.pk).exists()
