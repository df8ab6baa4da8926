"""`pause_queue` takes effect when it returns: no job of the queue starts after that, not
even one a worker claimed before the pause and holds in its batch. In-process, against the
real database (the worker loop driven directly); the real-process test is in
tests/workers/test_flow_pause.py."""

from __future__ import annotations

import time

import pytest
from django.db import transaction

import django_sqlqueue
from django_sqlqueue.databases.paused import PAUSED_TTL
from django_sqlqueue.models import Job
from django_sqlqueue.states import Status
from tests.runtime.test_worker_loop import make_worker
from tests.testapp.jobs import noop, pause_own_queue

pytestmark = pytest.mark.django_db(transaction=True)


def test_jobs_claimed_before_a_pause_do_not_start_once_it_returned(alias):
    pauser = pause_own_queue.using(queue="mail").enqueue("mail")
    held = [noop.using(queue="mail").enqueue() for _ in range(4)]
    other = noop.enqueue()
    worker, claimer = make_worker(alias, burst=True)
    assert worker.register()  # a worker is running: pause_queue waits for it
    worker.estimates.observe("tests.pause_own_queue", 0.001)
    worker.estimates.observe("tests.noop", 0.001)
    assert worker.work() == 0
    # One claim took the pauser, the four behind it and the other queue's job.
    assert sorted(claimer.claimed[0]) == sorted([pauser.pk, *(j.pk for j in held), other.pk])
    assert Job.objects.get(pk=pauser.pk).status == Status.COMPLETED
    assert Job.objects.get(pk=other.pk).status == Status.COMPLETED
    rows = Job.objects.filter(pk__in=[j.pk for j in held])
    assert (
        sorted(rows.values_list("status", "attempts", "lease_owner"))
        == [(Status.PENDING, 0, "")] * 4
    ), "handed back unspent, for when the queue is resumed"
    worker.unregister()


def test_pause_waits_out_the_workers_readings_only_while_workers_run(alias):
    worker, _ = make_worker(alias)
    assert worker.register()
    started = time.monotonic()
    assert django_sqlqueue.pause_queue("mail") is True
    assert time.monotonic() - started >= PAUSED_TTL
    # Paused again at once: the readings from before the first pause may still be in use.
    started = time.monotonic()
    assert django_sqlqueue.pause_queue("mail") is False
    assert time.monotonic() - started > 0
    worker.unregister()


def test_inside_a_transaction_the_wait_comes_at_commit(alias):
    worker, _ = make_worker(alias)
    assert worker.register()
    with transaction.atomic():
        django_sqlqueue.pause_queue("mail")
        committing = time.monotonic()
    assert time.monotonic() - committing >= PAUSED_TTL
    worker.unregister()
