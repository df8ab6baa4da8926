"""The outcome writer of a worker with many slots (group_recording.py): the successes of the
slots that finished while it wrote are recorded together, in one statement through the door."""

from __future__ import annotations

import logging

import pytest
from django.utils import timezone

from django_sqlqueue.attempts import AttemptOutcome
from django_sqlqueue.databases import queue_database
from django_sqlqueue.databases.base import QueueDatabase
from django_sqlqueue.models import Job
from django_sqlqueue.runtime.activity_log import ActivitySummary
from django_sqlqueue.runtime.group_recording import GroupWriter, Request
from django_sqlqueue.runtime.recording import OutcomeRecorder
from django_sqlqueue.runtime.runner import AttemptResult
from django_sqlqueue.states import COMPLETE, Status
from tests.testapp.jobs import noop

pytestmark = pytest.mark.django_db(transaction=True)


def test_successes_queued_together_are_written_in_one_statement(alias, monkeypatch):
    jobs = [noop.enqueue() for _ in range(5)]
    claimed = queue_database(alias).claimer().claim("w1", None, 5, 60, timezone.now())
    assert len(claimed) == 5
    # Count the door's statements (the real door writes them: nothing is replaced).
    exits: list[tuple[str, int]] = []
    real = QueueDatabase.leave_running

    def counted(self, jobs, exit, **kwargs):
        exits.append((exit.shape.transition.name, len(jobs)))
        return real(self, jobs, exit, **kwargs)

    monkeypatch.setattr(QueueDatabase, "leave_running", counted)
    recorder = OutcomeRecorder("w1", alias, ActivitySummary("w1", logging.getLogger("t")), 60)
    writer = GroupWriter(recorder)
    # Five slots finish before the writer looks: their requests wait in its inbox.
    requests = [
        Request(success=(job, None, AttemptResult(AttemptOutcome.COMPLETED), 0.01))
        for job in claimed
    ]
    for request in requests:
        writer.inbox.put(request)
    writer.start()
    assert all(request.done.wait(30) for request in requests)
    writer.close()

    assert exits == [(COMPLETE.name, 5)]
    assert set(
        Job.objects.filter(pk__in=[j.pk for j in jobs]).values_list("status", flat=True)
    ) == {Status.COMPLETED}
