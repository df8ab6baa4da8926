"""`runworkers --stop-after N`: the workers run N jobs in all, not one more, and the supervisor
exits 0 once the last of them has finished."""

from __future__ import annotations

import pytest

from django_sqlqueue.models import Job, Worker
from django_sqlqueue.states import Status
from tests.probes import Probes
from tests.stopping import with_stack_dumps
from tests.testapp.jobs import hard_exit, record, sleep
from tests.testapp.models import Execution

from .conftest import wait_for

pytestmark = pytest.mark.workers


def never_claimed(jobs: list[Job]) -> bool:
    """Still as enqueued: no claim ever took them (not even one handed back)."""
    rows = Job.objects.filter(pk__in=[job.pk for job in jobs])
    return all((row.status, row.attempts, row.history) == (Status.PENDING, 0, []) for row in rows)


def test_several_workers_run_n_jobs_in_all_and_claim_no_more(workers):
    jobs = record.enqueue_many([{"label": str(i)} for i in range(40)])
    log = workers.run("-n", "3", "--stop-after", "25", timeout=60)

    assert Job.objects.filter(status=Status.COMPLETED).count() == 25
    assert Execution.objects.count() == 25
    # The other 15 were never claimed: the workers claim only what is left to run, so none
    # was claimed and handed back.
    assert never_claimed([job for job in jobs if job.pk not in completed_ids()])
    assert "stop after 25 jobs" in log  # the banner
    assert "25 jobs run (--stop-after); stopping" in log
    assert not Worker.objects.exists()


def completed_ids() -> set[int]:
    return set(Job.objects.filter(status=Status.COMPLETED).values_list("pk", flat=True))


def test_without_burst_it_waits_for_jobs_until_n_have_run(workers, probes: Probes):
    record.enqueue(label="first")
    supervisor = workers.start("-n", "2", "--stop-after", "3", env=with_stack_dumps({}))
    wait_for(lambda: Execution.objects.count() == 1, timeout=30)
    # One job run of three: it waits for more. Both workers wait for work, and the
    # supervisor goes round its loop (its scheduler's runs) three times with them idle.
    ran = probes.mark()
    wait_for(lambda: Worker.objects.count() == 2, timeout=30)
    pids = set(Worker.objects.values_list("pid", flat=True))
    for pid in pids:
        probes.wait("worker-idle", after=ran, pid=pid)
    idle = probes.mark()
    probes.wait("scheduler-tick", after=idle, pid=supervisor.pid, count=3)
    assert supervisor.poll() is None
    assert set(Worker.objects.values_list("pid", flat=True)) == pids

    record.enqueue(label="second")
    later = record.enqueue_many([{"label": "third"}, {"label": "fourth"}])
    # Idle workers are stopped once all three jobs have started, not left to poll: the
    # supervisor exits (a worker left to poll would keep it waiting for good).
    assert workers.wait(supervisor, timeout=60) == 0, workers.log(supervisor)
    assert "3 jobs run (--stop-after); stopping" in workers.log(supervisor)
    assert Execution.objects.count() == 3
    assert Job.objects.filter(status=Status.PENDING).count() == 1
    assert Job.objects.filter(pk__in=[job.pk for job in later], status=Status.PENDING).exists()


def test_the_last_jobs_finish_without_a_grace_period(workers):
    """Jobs still running when the N-th has started finish, however long: nothing is cut
    short by the grace period of a shutdown."""
    jobs = sleep.enqueue_many([{"seconds": 1.5}, {"seconds": 1.5}, {"seconds": 1.5}])
    log = workers.run("-n", "3", "--stop-after", "2", "--grace-period", "0", timeout=60)

    done = Job.objects.filter(status=Status.COMPLETED)
    assert done.count() == 2
    assert Execution.objects.filter(label="sleep-end").count() == 2
    assert never_claimed([job for job in jobs if job.pk not in completed_ids()])
    assert "interrupted" not in log


def test_a_worker_that_dies_counts_its_job_and_gives_back_the_ones_it_had_not_started(workers):
    """A batch [exit, c, d]: the worker dies in `exit`; c and d go back to the queue unspent,
    and their starts to the budget, so that a fresh worker runs two more jobs (without them
    back, the supervisor would stop after the warm-ups and exit)."""
    # A worker keeps a job of a name it has never run only alone, so both names run once
    # first: `a` is claimed alone (no durations known yet), the warm-up alone (a new name).
    first = record.enqueue(label="a")
    warm_up = hard_exit.enqueue(warm_up=True)
    fatal = hard_exit.enqueue()  # max_attempts=1
    rest = record.enqueue_many([{"label": "c"}, {"label": "d"}, {"label": "e"}])

    # A claim budget far above these jobs' durations on any machine: the worker keeps
    # [exit, c, d] in one batch, and its watch does not hand c and d back while `exit` runs.
    # (At the default 50 ms, a slow disk's commits made `record` too slow to batch.)
    budget = {"SQLQUEUE_TEST_CLAIM_BUDGET": "30"}
    log = workers.run("-n", "1", "--stop-after", "5", timeout=60, env=budget)

    fatal.refresh_from_db()
    assert fatal.status == Status.DEAD
    assert "exited with status 3" in fatal.last_error
    for job in (first, warm_up):
        job.refresh_from_db()
        assert job.status == Status.COMPLETED
    assert Execution.objects.count() == 5
    assert Job.objects.filter(pk__in=[job.pk for job in rest], status=Status.COMPLETED).count() == 2
    # c and d were claimed with `exit` and handed back unspent when its worker died.
    for job in rest[:2]:
        job.refresh_from_db()
        assert job.history[0]["outcome"] == "released"
    assert Job.objects.filter(status=Status.PENDING, attempts=0).count() == 1
    assert "5 jobs run (--stop-after); stopping" in log


def test_with_burst_it_also_stops_when_nothing_is_ready(workers):
    record.enqueue_many([{"label": "1"}, {"label": "2"}])
    log = workers.run("-n", "2", "--burst", "--stop-after", "10", timeout=60)
    assert Execution.objects.count() == 2
    assert "run (--stop-after)" not in log


def test_stop_after_must_be_positive(workers):
    process = workers.start("--stop-after", "0")
    assert process.wait(timeout=30) != 0
    assert "--stop-after must be at least 1" in workers.log(process)
