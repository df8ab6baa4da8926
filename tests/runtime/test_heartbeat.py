"""The worker's heartbeat, in-process: it renews what the worker holds and keeps the worker's
row in the workers table, even after housekeeping took it for dead and removed it."""

from __future__ import annotations

import os

import pytest

from django_sqlqueue.models import Worker
from django_sqlqueue.runtime.heartbeat import Heartbeat, insert_worker_row

pytestmark = pytest.mark.django_db(transaction=True)


def heartbeat(alias: str, worker_id: str, done: int = 0) -> Heartbeat:
    return Heartbeat(
        worker_id,
        alias,
        interval=20,
        lease_seconds=60,
        current_job=lambda: None,
        held_jobs=list,
        jobs_done=lambda: done,
        on_orphaned=lambda: None,
        on_overdue=lambda: None,
        queues=("mail", "default"),
    )


def test_a_beat_updates_the_row(alias: str) -> None:
    insert_worker_row("hb-worker", alias, ("mail", "default"))
    heartbeat(alias, "hb-worker", done=7).beat()
    assert Worker.objects.using(alias).get(id="hb-worker").jobs_done == 7


def test_a_live_worker_whose_row_was_removed_registers_again(alias: str) -> None:
    """A handler that holds the GIL for three leases starves the heartbeat thread; a
    supervisor's housekeeping then removes the row as stale. The worker lives on: its next beat
    puts the row back, or it would stay invisible to `jobstatus`, the admin and the metrics."""
    insert_worker_row("hb-worker", alias, ("mail", "default"))
    Worker.objects.using(alias).filter(id="hb-worker").delete()
    heartbeat(alias, "hb-worker", done=3).beat()
    row = Worker.objects.using(alias).get(id="hb-worker")
    assert (row.pid, row.queues) == (os.getpid(), "mail,default")


def test_counters_are_written_between_beats_only_when_they_changed(alias: str) -> None:
    """`jobstatus --workers` said "0 jobs done" for a heartbeat (20 s) after jobs ran: the
    counters go to the row between beats, once they changed, and not again until they do."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    insert_worker_row("hb-worker", alias, ("mail", "default"))
    done = [0]
    beat = heartbeat(alias, "hb-worker")
    beat.jobs_done = lambda: done[0]
    beat.beat()
    done[0] = 5
    with CaptureQueriesContext(connections[alias]) as written:
        beat.report_counters()
        beat.report_counters()  # unchanged: nothing written
    assert Worker.objects.using(alias).get(id="hb-worker").jobs_done == 5
    assert len(written) == 1
    updated_at = Worker.objects.using(alias).get(id="hb-worker").last_seen_at
    done[0] = 6
    beat.report_counters()
    row = Worker.objects.using(alias).get(id="hb-worker")
    assert row.jobs_done == 6 and row.last_seen_at == updated_at  # not a heartbeat
