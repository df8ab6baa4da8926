"""Unique jobs: unique=True while active, unique_for within a window, unique_by, enqueue_many,
transactions, and the errors for bad options."""

from __future__ import annotations

import itertools
import threading
import time
import traceback
from datetime import timedelta

import pytest
from django.db import connections, transaction
from django.utils import timezone

from django_sqlqueue.databases import queue_database
from django_sqlqueue.exceptions import InvalidJobError
from django_sqlqueue.models import Job
from django_sqlqueue.runtime import transitions
from django_sqlqueue.states import Status

pytestmark = pytest.mark.django_db(transaction=True)


def sync_user(user_id, full=False):
    return user_id


def test_unique_while_pending_failed_or_running(register_job):
    handler = register_job("flow.sync", sync_user, unique=True)
    first = handler.enqueue(user_id=1)
    again = handler.enqueue(user_id=1)
    assert again.deduplicated and again.pk == first.pk
    other = handler.enqueue(user_id=2)
    assert not other.deduplicated and other.pk != first.pk
    # Positional and keyword arguments are different calls (compared as passed).
    for status in (Status.FAILED, Status.RUNNING):
        Job.objects.filter(pk=first.pk).update(status=status)
        assert handler.enqueue(user_id=1).pk == first.pk
    # Once it finished, a new job is stored.
    for status in (Status.COMPLETED, Status.DEAD, Status.CANCELLED):
        Job.objects.filter(unique_key=first.unique_key).update(status=status)
        fresh = handler.enqueue(user_id=1)
        assert not fresh.deduplicated and fresh.pk != first.pk
        assert fresh.unique_key == first.unique_key


def test_unique_by_compares_only_those_arguments(register_job):
    handler = register_job("flow.sync_by", sync_user, unique=True, unique_by=("user_id",))
    first = handler.enqueue(user_id=1, full=False)
    assert handler.enqueue(user_id=1, full=True).pk == first.pk
    assert handler.enqueue(1, full=True).pk == first.pk  # positional: bound to its name
    assert handler.enqueue(user_id=2).pk != first.pk


def test_unique_for_whatever_the_state(register_job):
    handler = register_job("flow.window", sync_user, unique_for=timedelta(seconds=60))
    first = handler.enqueue(user_id=1)
    Job.objects.filter(pk=first.pk).update(status=Status.COMPLETED)
    again = handler.enqueue(user_id=1)
    assert again.deduplicated and again.pk == first.pk
    assert first.unique_key is None  # unique_for alone keeps no active key
    # Out of the window: a new job, which opens a new window.
    from django_sqlqueue.models import FlowKey

    FlowKey.objects.update(until=timezone.now() - timedelta(seconds=1))
    later = handler.enqueue(user_id=1)
    assert not later.deduplicated and later.pk != first.pk
    assert handler.enqueue(user_id=1).pk == later.pk


def test_unique_inside_a_transaction_that_rolls_back(register_job):
    handler = register_job("flow.tx", sync_user, unique=True, unique_for=30)
    with pytest.raises(RuntimeError), transaction.atomic():
        handler.enqueue(user_id=1)
        assert handler.enqueue(user_id=1).deduplicated
        raise RuntimeError
    assert not Job.objects.exists()
    stored = handler.enqueue(user_id=1)
    assert not stored.deduplicated


def test_enqueue_many_dedupes_within_the_batch_and_against_the_table(register_job):
    handler = register_job("flow.many", sync_user, unique=True)
    queued = handler.enqueue(user_id=3)
    jobs = handler.enqueue_many([{"user_id": 1}, {"user_id": 2}, {"user_id": 1}, {"user_id": 3}])
    assert [j.deduplicated for j in jobs] == [False, False, True, True]
    assert jobs[2].pk == jobs[0].pk and jobs[3].pk == queued.pk
    assert Job.objects.count() == 3


def test_unique_with_an_idempotency_key_is_a_clear_error(register_job):
    handler = register_job("flow.both", sync_user, unique=True)
    with pytest.raises(
        InvalidJobError, match=r"'flow.both' is declared unique.*without idempotency_key"
    ):
        handler.using(idempotency_key="k").enqueue(user_id=1)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"unique": "yes"}, "unique must be True or False"),
        ({"unique_for": timedelta(0)}, "unique_for must be a positive timedelta"),
        ({"unique_for": -5}, "unique_for must be a positive timedelta"),
        ({"unique_by": ("user_id",)}, "add unique=True or unique_for"),
        ({"unique": True, "unique_by": ("nope",)}, "unique_by names 'nope'"),
    ],
)
def test_bad_unique_options_fail_at_decoration(register_job, options, message):
    with pytest.raises(InvalidJobError, match=message) as caught:
        register_job("flow.bad", sync_user, **options)
    assert "flow.bad" in str(caught.value)


@pytest.mark.slow
@pytest.mark.parametrize("in_transaction", [False, True], ids=["autocommit", "in-transaction"])
def test_unique_enqueues_racing_completions_read_the_winner(register_job, alias, in_transaction):
    """Threads enqueue one unique job over and over while a worker's claimer claims and
    completes it through the door: each enqueue stores the job or returns the active one,
    never an error (MariaDB once raised deadlocks from the read of the winner, 9 in 28,000)."""
    handler = register_job("flow.race", sync_user, unique=True)
    enqueuers, rounds = 3, 400
    errors: list[str] = []  # tracebacks
    stored: list[int] = []
    completions: list[int] = []
    done = threading.Event()
    deadline = time.monotonic() + 180

    def racing() -> bool:
        """Until each enqueuer made its rounds and the completer finished a few jobs they
        raced for (on SQLite, whose one write lock the enqueuers can hold for a long while
        on a loaded machine, the rounds alone could end before the completer got one in)."""
        return time.monotonic() < deadline and len(completions) < 5

    def enqueue() -> None:
        try:
            for round_ in itertools.count():
                if round_ >= rounds:
                    if not racing():
                        break
                    time.sleep(0.001)  # past the rounds: leave the completer a way in
                if in_transaction:
                    with transaction.atomic(using=alias):
                        job = handler.enqueue(user_id=1)
                else:
                    job = handler.enqueue(user_id=1)
                if not job.deduplicated:
                    stored.append(job.pk)
        except BaseException:
            errors.append(traceback.format_exc())
        finally:
            connections[alias].close()

    def complete() -> None:
        claimer = queue_database(alias).claimer()
        try:
            while not done.is_set():
                for claimed in claimer.claim("racer", None, 1, 60, timezone.now()):
                    if transitions.complete(claimed, None, alias=alias):
                        completions.append(claimed.id)
        except BaseException:
            errors.append(traceback.format_exc())
        finally:
            connections[alias].close()

    threads = [threading.Thread(target=enqueue) for _ in range(enqueuers)]
    completer = threading.Thread(target=complete)
    completer.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=240)
    done.set()
    completer.join(timeout=60)

    assert errors == [], "\n".join(errors)
    assert len(stored) > 1, "the completer never finished a job the enqueuers raced for"
    jobs = Job.objects.using(alias).filter(name="flow.race")
    assert sorted(jobs.values_list("pk", flat=True)) == sorted(stored)
    assert jobs.exclude(status=Status.COMPLETED).count() <= 1
