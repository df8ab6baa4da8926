"""Jobs run by real worker processes end in the right state, each outcome recorded."""

from __future__ import annotations

import re
import signal
from datetime import datetime

import pytest
from django.conf import settings
from django.db import connection

from django_sqlqueue.models import Job
from django_sqlqueue.states import Status
from django_sqlqueue.tasks import tasks_summary
from tests.testapp.jobs import (
    add,
    async_job,
    bad_result,
    discard,
    fail_always,
    hard_exit,
    record,
    retry,
    segfault,
    sys_exit,
    too_slow,
)
from tests.testapp.models import Execution

from .conftest import wait_for

pytestmark = pytest.mark.workers


@pytest.mark.timeout(600)  # its own bound on the run is 300 s
def test_many_jobs_each_run_exactly_once(workers):
    jobs = record.enqueue_many([{"label": f"job-{i}"} for i in range(2000)])

    log = workers.run("-n", "4", "--burst", timeout=300)

    left = list(Job.objects.exclude(status=Status.COMPLETED).values("id", "status", "lease_owner"))
    assert left == [], f"left by the burst run: {left[:20]}\n{log[-4000:]}"
    assert Execution.objects.count() == 2000
    assert Execution.objects.values("job_id").distinct().count() == 2000
    assert not Job.objects.exclude(attempts=1).exists()
    # All four workers took part: the claim hands different jobs to concurrent workers.
    assert Execution.objects.values("worker_pid").distinct().count() == 4
    assert {j.pk for j in jobs} == set(Execution.objects.values_list("job_id", flat=True))


def test_result_is_stored(workers):
    job = add.enqueue(2, 3)
    workers.run("--burst")
    job.refresh_from_db()
    assert job.status == Status.COMPLETED
    assert job.result == 5
    assert job.attempts == 1
    assert job.started_at <= job.finished_at
    [entry] = job.history
    assert entry["outcome"] == "completed"
    assert entry["worker"]


def test_async_handler(workers):
    job = async_job.enqueue(21)
    workers.run("--burst")
    job.refresh_from_db()
    assert (job.status, job.result) == (Status.COMPLETED, 42)
    assert Execution.objects.get(job_id=job.pk).label == "async"


def test_failures_retry_with_backoff_then_go_dead(workers):
    job = fail_always.enqueue()  # max_attempts=3, BACKOFF_BASE 0.2 s in test settings
    workers.run("--burst")
    job.refresh_from_db()
    # The first failure schedules a retry in the future, so a burst run stops there.
    assert job.status == Status.FAILED
    assert job.attempts == 1
    finished = datetime.fromisoformat(job.history[0]["finished_at"])
    delay = (job.run_at - finished).total_seconds()
    assert 0.1 - 0.001 <= delay <= 0.2 + 0.001  # base 0.2 s with 50% jitter
    assert "ValueError: boom on attempt 1" in job.last_error
    assert "Traceback" in job.history[0]["traceback"]
    # The attempt started when it was claimed: the history and the row say the same.
    assert datetime.fromisoformat(job.history[0]["started_at"]) == job.started_at

    for _ in range(10):
        if job.status == Status.DEAD:
            break
        Job.objects.filter(pk=job.pk).update(run_at=job.run_at.replace(year=2000))
        workers.run("--burst")
        job.refresh_from_db()
    assert job.status == Status.DEAD
    assert job.attempts == 3
    assert [h["outcome"] for h in job.history] == ["error", "error", "error"]
    assert Execution.objects.filter(job_id=job.pk).count() == 3


def test_retry_exception_reschedules_without_error_and_is_bounded(workers):
    job = retry.enqueue(delay=0)  # always asks for a retry; max_attempts=3
    workers.run("--burst")
    job.refresh_from_db()
    assert job.status == Status.DEAD
    assert job.attempts == 3
    assert [h["outcome"] for h in job.history] == ["retry", "retry", "retry"]
    assert all(h["traceback"] == "" for h in job.history)


def test_retry_delay_is_honoured(workers):
    job = retry.enqueue(delay=3600)
    workers.run("--burst")
    job.refresh_from_db()
    assert job.status == Status.FAILED
    finished = datetime.fromisoformat(job.history[0]["finished_at"])
    assert abs((job.run_at - finished).total_seconds() - 3600) < 1


def test_discard_goes_dead_at_once(workers):
    job = discard.enqueue()
    workers.run("--burst")
    job.refresh_from_db()
    assert job.status == Status.DEAD
    assert job.attempts == 1
    assert "payload is obsolete" in job.last_error


def test_unknown_handler_goes_dead_with_a_message(workers):
    job = Job.objects.create(name="no.such.job")
    log = workers.run("--burst")
    # Said at start-up first, before any worker claims it (the check W031).
    assert "django_sqlqueue.W031: 1 of the next due jobs is named 'no.such.job'" in log
    job.refresh_from_db()
    assert job.status == Status.DEAD
    assert "No handler for job 'no.such.job'" in job.last_error
    assert "`jobs.py` modules of INSTALLED_APPS" in job.last_error  # where handlers must live


def test_non_json_result_fails_clearly(workers):
    job = bad_result.enqueue()
    workers.run("--burst")
    job.refresh_from_db()
    assert job.status == Status.DEAD
    assert "return value" in job.last_error and "set" in job.last_error
    [attempt] = job.history
    assert attempt["exception"] == "builtins.TypeError"
    assert attempt["traceback"].startswith("Traceback (most recent call last):")
    assert attempt["traceback"].rstrip().splitlines()[-1] == f"TypeError: {job.last_error}"


def test_timeout_stops_the_attempt_and_the_worker_continues(workers):
    slow = too_slow.enqueue()  # timeout=1, max_attempts=2
    after = add.enqueue(1, 1)
    workers.run("--burst", timeout=60)
    slow.refresh_from_db()
    after.refresh_from_db()
    assert slow.status in (Status.FAILED, Status.DEAD)
    assert slow.history[0]["outcome"] == "timeout"
    assert "Timed out after 1 s" in slow.history[0]["error"]
    assert after.status == Status.COMPLETED


def test_handler_calling_os_exit_costs_only_its_process(workers):
    fatal = hard_exit.enqueue()  # max_attempts=1
    others = add.enqueue_many([{"a": i, "b": i} for i in range(20)])
    output = workers.run("-n", "2", "--burst", timeout=60)
    fatal.refresh_from_db()
    assert fatal.status == Status.DEAD
    assert "exited with status 3" in fatal.last_error
    assert fatal.history[-1]["outcome"] == "lost"
    assert Job.objects.filter(pk__in=[j.pk for j in others], status=Status.COMPLETED).count() == 20
    assert "exited with status 3" in output


def test_handler_raising_system_exit_is_an_ordinary_failure(workers):
    job = sys_exit.enqueue()  # max_attempts=1
    follower = add.enqueue(2, 2)
    workers.run("--burst")
    job.refresh_from_db()
    follower.refresh_from_db()
    assert job.status == Status.DEAD
    assert job.last_error == "SystemExit: 4"
    assert job.history[-1]["outcome"] == "error"
    assert follower.status == Status.COMPLETED


def test_max_jobs_recycles_worker_processes(workers):
    record.enqueue_many([{"label": str(i)} for i in range(12)])
    workers.run("-n", "1", "--burst", "--max-jobs", "5", timeout=60)
    assert Execution.objects.count() == 12
    assert Execution.objects.values("worker_pid").distinct().count() == 3


def test_queues_option_limits_what_is_claimed(workers):
    mail = add.using(queue="mail").enqueue(1, 2)
    other = add.using(queue="reports").enqueue(3, 4)
    workers.run("--burst", "--queues", "mail")
    mail.refresh_from_db()
    other.refresh_from_db()
    assert mail.status == Status.COMPLETED
    assert other.status == Status.PENDING


def test_bad_options_are_rejected(workers):
    process = workers.start("-n", "0")
    assert process.wait(timeout=30) != 0
    assert "-n/--workers must be at least 1" in workers.log(process)


def test_handler_that_segfaults_costs_only_its_process(workers):
    crash = segfault.enqueue()  # max_attempts=1
    after = add.enqueue(3, 4)
    output = workers.run("--burst", timeout=60)
    crash.refresh_from_db()
    after.refresh_from_db()
    assert crash.status == Status.DEAD
    assert "killed by SIGSEGV" in crash.last_error
    assert after.status == Status.COMPLETED
    assert "killed by SIGSEGV" in output


def test_runworkers_refuses_to_start_without_the_tables(workers, tmp_path):
    empty = tmp_path / "empty.sqlite3"
    env = {"SQLQUEUE_TEST_DB": "sqlite", "SQLQUEUE_TEST_DB_NAME": str(empty)}
    process = workers.start("--burst", env=env)
    assert process.wait(timeout=30) == 1
    assert "Run `manage.py migrate` first" in workers.log(process)


def test_retry_delay_is_capped_at_a_year(workers):
    job = retry.enqueue(delay=1e12)
    workers.run("--burst")
    job.refresh_from_db()
    assert job.status == Status.FAILED
    finished = datetime.fromisoformat(job.history[0]["finished_at"])
    assert abs((job.run_at - finished).total_seconds() - 366 * 24 * 3600) < 1


def test_runworkers_starts_while_the_database_is_unreachable(workers):
    """Under a process manager the database may come up after the workers: they wait."""
    if connection.vendor == "sqlite":
        pytest.skip("SQLite is a file: it is never unreachable")
    process = workers.start("-n", "1", env={"PGPORT": "1", "MYSQL_PORT": "1"})
    wait_for(lambda: "database error" in workers.log(process), timeout=60)
    assert process.poll() is None
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0


def test_log_summarises_successes_and_lists_each_one_at_verbosity_2(workers):
    """Per-job success lines cost a no-op job a fifth of its time: INFO gets a summary."""
    add.enqueue_many([{"a": n, "b": 1} for n in range(5)])
    fail_always.using(max_attempts=1).enqueue()

    quiet = workers.run("--burst")

    assert "completed in" not in quiet
    assert "completed 5, failed 1 in" in quiet
    assert "is dead after" in quiet  # failures are still logged one by one
    # The banner counts the @job handlers (those of tests/testapp/jobs.py: this process may
    # have registered more) and names the TASKS entries whose tasks it runs.
    assert re.search(r"jobs: \d+ registered \(tests\.add, tests\.\w+, ", quiet), quiet
    assert f"; {tasks_summary(settings.TASKS)}\n" in quiet

    add.enqueue(a=1, b=2)
    verbose = workers.run("--burst", "-v", "2")

    assert verbose.count("completed in") == 1
    assert "completed 1, failed 0 in" in verbose


def test_supervisor_analyses_the_job_table_after_a_burst(workers):
    """12,000 jobs enqueued at once (over the 10,000 changed rows that call for it): the
    supervisor analyses the table while its workers drain it, and still stops cleanly. The
    drain itself is not waited for (a minute on a slow day)."""
    if connection.vendor != "postgresql":
        pytest.skip("planner statistics are PostgreSQL's")
    add.enqueue_many([{"a": n, "b": 1} for n in range(12_000)])
    with connection.cursor() as cursor:  # publish this session's row counts now
        cursor.execute("SELECT pg_stat_force_next_flush()")
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")

    supervisor = workers.start("-n", "2")
    wait_for(lambda: "Analysed the job table: " in workers.log(supervisor), timeout=120)
    wait_for(lambda: Job.objects.filter(status=Status.COMPLETED).exists(), timeout=60)
    supervisor.send_signal(signal.SIGTERM)
    assert workers.wait(supervisor, timeout=60) == 0, workers.log(supervisor)
    assert not Job.objects.filter(status=Status.RUNNING).exists()


def test_excluded_queues_are_left_alone(workers):
    """runworkers --exclude-queues reports: every queue's jobs run but those of `reports`."""
    left = record.using(queue="reports").enqueue(label="left")
    ran = [record.using(queue=queue).enqueue(label=queue) for queue in ("default", "mail")]
    log = workers.run("--burst", "-n", "1", "--exclude-queues", "reports", timeout=60)
    assert Job.objects.get(pk=left.pk).status == Status.PENDING, log
    assert {Job.objects.get(pk=job.pk).status for job in ran} == {Status.COMPLETED}
    assert "queues: all but reports" in log


def test_a_workers_counters_are_seconds_behind_not_a_heartbeat(workers):
    """The worker's row says how many jobs it ran a couple of seconds after it ran them (the
    heartbeat, every 20 s by default, used to be the only writer)."""
    from django_sqlqueue.models import Worker

    # The default lease and heartbeat (the test settings beat every second).
    slow_beat = {"SQLQUEUE_TEST_LEASE": "60", "SQLQUEUE_TEST_HEARTBEAT": "20"}
    supervisor = workers.start("-n", "1", env=slow_beat)
    wait_for(lambda: Worker.objects.exists(), timeout=60)
    ran = [record.enqueue(label=f"counted-{n}") for n in range(3)]
    wait_for(lambda: Job.objects.filter(pk__in=[j.pk for j in ran], status="completed").count()
             == 3, timeout=60)  # fmt: skip
    wait_for(lambda: Worker.objects.filter(jobs_done=3).exists(), timeout=10)
    assert supervisor.poll() is None
