"""Batches run by real worker processes: the callback is stored exactly once, after every
member finished, also when workers are SIGKILLed while the members run."""

from __future__ import annotations

import contextlib
import os
import signal

import pytest
from django.db.models import Max

from django_sqlqueue import batch
from django_sqlqueue.models import Job, JobBatch
from tests.testapp.jobs import batch_report, open_batch, record
from tests.testapp.models import Execution

from .conftest import wait_for

pytestmark = pytest.mark.workers

MEMBERS = 2_000
KILLS = 5


def member_runs() -> int:
    return Execution.objects.filter(label__startswith="member-").count()


def test_a_batch_of_2000_under_sigkills_calls_back_once_after_every_member(workers):
    with batch(on_complete=batch_report.prepare(label="report")) as b:
        record.enqueue_many([{"label": f"member-{n}", "sleep": 0.002} for n in range(MEMBERS)])
    supervisor = workers.start("-n", "2")

    killed = []
    for kill in range(1, KILLS + 1):
        # After each 1/8 of the members has run, SIGKILL the worker that ran the latest.
        wait_for(lambda k=kill: member_runs() >= k * MEMBERS // 8, timeout=120)
        pid = Execution.objects.order_by("-id").values_list("worker_pid", flat=True).first()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    wait_for(lambda: Job.objects.filter(name="tests.batch_report", status="completed").exists(),
             timeout=180)  # fmt: skip
    [callback] = Job.objects.filter(name="tests.batch_report")
    members = Job.objects.filter(batch_id=b.id)
    assert members.count() == MEMBERS
    assert not members.exclude(status__in=["completed", "dead", "cancelled"]).exists()
    result = callback.result
    assert result["id"] == b.id and result["total"] == MEMBERS
    assert result["completed"] + result["dead"] + result["cancelled"] == MEMBERS
    # It ran after every member's last run ended.
    last_member_end = members.aggregate(end=Max("finished_at"))["end"]
    assert callback.started_at >= last_member_end
    [report_run] = Execution.objects.filter(label="report")
    assert (
        report_run.id
        > Execution.objects.filter(label__startswith="member-").aggregate(last=Max("id"))["last"]
    )
    assert JobBatch.objects.get(pk=b.id).callback_job_id == callback.pk
    assert killed, "no worker was killed"
    assert supervisor.poll() is None


def test_a_callback_that_opens_a_batch_runs_its_own_callback_once(workers):
    with batch(on_complete=open_batch.prepare(size=20, label="inner")) as outer:
        for n in range(20):
            record.enqueue(label=f"outer-{n}")

    log = workers.run("--burst", "-n", "2", "--concurrency", "2", timeout=120)

    [inner_report] = Job.objects.filter(name="tests.batch_report", kwargs__label="inner-report")
    assert inner_report.status == "completed", log
    assert inner_report.result["total"] == 20 and inner_report.result["completed"] == 20
    inner_id = Job.objects.get(name="tests.open_batch").result
    assert inner_report.result["id"] == inner_id != outer.id
    labels = list(Execution.objects.order_by("id").values_list("label", flat=True))
    assert labels.count("inner") == 1 and labels.count("inner-report") == 1
    assert labels.index("inner") > max(labels.index(f"outer-{n}") for n in range(20))
