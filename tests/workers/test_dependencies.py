"""Jobs that wait for other jobs, run by real worker processes: order kept, each released
once, also when the worker of a dependency is SIGKILLed."""

from __future__ import annotations

import os
import signal

import pytest

from django_sqlqueue.models import Job
from django_sqlqueue.states import ABANDONED_OWNER, Status
from tests.testapp.jobs import gather, hard_exit, record, sleep, stall_first
from tests.testapp.models import Execution

from .conftest import wait_for

pytestmark = pytest.mark.workers


def runs(label: str) -> list[int]:
    """The ids of the Execution rows of `label`, in the order they were written."""
    return list(Execution.objects.filter(label=label).order_by("id").values_list("id", flat=True))


def test_a_diamond_and_a_chain_run_in_order_each_once(workers):
    a = record.enqueue(label="a")
    b = record.using(after=[a]).enqueue(label="b")
    c = record.using(after=[a]).enqueue(label="c")
    d = gather.using(after=[b, c]).enqueue(label="d")
    steps = [record.enqueue(label="step-0")]
    for n in range(1, 20):
        steps.append(record.using(after=[steps[-1]]).enqueue(label=f"step-{n}"))

    log = workers.run("--burst", "-n", "2", "--concurrency", "2", timeout=120)

    everything = [a, b, c, d, *steps]
    left = Job.objects.filter(pk__in=[j.pk for j in everything]).exclude(status="completed")
    assert not left.exists(), (list(left.values_list("id", "kwargs", "status")), log)
    labels = ["a", "b", "c", "d"] + [f"step-{n}" for n in range(20)]
    assert all(len(runs(label)) == 1 for label in labels), "each ran once"
    assert runs("a")[0] < min(runs("b")[0], runs("c")[0])
    assert max(runs("b")[0], runs("c")[0]) < runs("d")[0]
    chain = [runs(f"step-{n}")[0] for n in range(20)]
    assert chain == sorted(chain)
    assert Job.objects.get(pk=d.pk).result["after"] == {str(b.pk): "b", str(c.pk): "c"}


def test_a_dependency_whose_worker_is_sigkilled_runs_again_before_its_dependent(workers):
    """The dependency's first attempt dies with its worker; the retry completes, and only then
    does the job waiting for it run, once."""
    stalled = stall_first.enqueue(seconds=600)
    after = gather.using(after=[stalled]).enqueue(label="after")
    supervisor = workers.start("-n", "1")
    wait_for(lambda: Execution.objects.filter(label="stall-1").exists(), timeout=60)
    assert Job.objects.get(pk=after.pk).status == Status.WAITING
    pid = Execution.objects.get(label="stall-1").worker_pid
    os.kill(pid, signal.SIGKILL)

    wait_for(lambda: Job.objects.get(pk=after.pk).status == Status.COMPLETED, timeout=120)
    assert [e.label for e in Execution.objects.order_by("id")] == ["stall-1", "stall-2", "after"]
    assert Job.objects.get(pk=after.pk).result["after"] == {str(stalled.pk): 2}
    assert supervisor.poll() is None


def test_a_dependency_lost_with_its_worker_cancels_what_waits_for_it(workers):
    """A job that kills its worker, with no attempts left, ends dead by the supervisor's
    recovery, which cancels the job waiting for it and releases the one that runs anyway."""
    fatal = hard_exit.enqueue()
    cancelled = record.using(after=[fatal]).enqueue(label="never")
    anyway = gather.using(after=[fatal], on_dependency_failure="run").enqueue(label="anyway")
    supervisor = workers.start("-n", "1")

    wait_for(lambda: Job.objects.get(pk=anyway.pk).status == Status.COMPLETED, timeout=120)
    assert Job.objects.get(pk=fatal.pk).status == Status.DEAD
    row = Job.objects.get(pk=cancelled.pk)
    assert row.status == Status.CANCELLED and row.lease_owner == ABANDONED_OWNER
    assert not Execution.objects.filter(label="never").exists()
    assert supervisor.poll() is None


def test_a_job_enqueued_after_a_running_one_runs_when_it_ends(workers):
    """Its worker claimed the dependency before the dependent existed, so it does not know to
    release it: the supervisor's sweep does."""
    running = sleep.enqueue(seconds=1.0, label="running")
    supervisor = workers.start("-n", "1")
    wait_for(lambda: Execution.objects.filter(label="running-start").exists(), timeout=60)
    late = gather.using(after=[running]).enqueue(label="late")

    wait_for(lambda: Job.objects.get(pk=late.pk).status == Status.COMPLETED, timeout=60)
    assert Job.objects.get(pk=late.pk).result["after"] == {str(running.pk): 1.0}
    assert supervisor.poll() is None
