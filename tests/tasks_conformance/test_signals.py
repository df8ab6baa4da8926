"""The framework's signals: `task_enqueued` in the enqueueing process, `task_started` and
`task_finished` in the worker; each sent once, by the backend class, with the right result."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.db import transaction

from . import tasks
from .conftest import RunWorkers, compat, worker_signals

Status = compat.TaskResultStatus if compat else None


def sender_path(backend: Any) -> str:
    return f"{type(backend).__module__}.{type(backend).__qualname__}"


@pytest.mark.django_db(transaction=True)
class TestTaskEnqueued:
    def test_sent_once_when_the_transaction_commits(
        self, alias: str, backend: Any, enqueued_signals: list[tuple[Any, Any]]
    ) -> None:
        with transaction.atomic(using=alias):
            result = tasks.add.enqueue(1, 2)
            assert enqueued_signals == []  # the task does not exist for others yet
        [(sender, sent)] = enqueued_signals
        assert sender is type(backend)
        assert sent == result
        assert sent.status == Status.READY

    def test_sent_at_once_outside_a_transaction(
        self, enqueued_signals: list[tuple[Any, Any]]
    ) -> None:
        result = tasks.add.enqueue(1, 2)
        assert [sent.id for _, sent in enqueued_signals] == [result.id]

    def test_not_sent_for_a_task_rolled_back(
        self, alias: str, enqueued_signals: list[tuple[Any, Any]]
    ) -> None:
        with pytest.raises(RuntimeError), transaction.atomic(using=alias):
            tasks.add.enqueue(1, 2)
            raise RuntimeError("the caller's transaction fails")
        assert enqueued_signals == []

    def test_sent_for_aenqueue(self, backend: Any, enqueued_signals: list[tuple[Any, Any]]) -> None:
        result = async_to_sync(tasks.add.aenqueue)(1, 2)
        [(sender, sent)] = enqueued_signals
        assert (sender, sent.id) == (type(backend), result.id)


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
class TestWorkerSignals:
    def test_each_sent_once_by_the_worker_with_the_result_of_the_moment(
        self, run_workers: RunWorkers, backend: Any
    ) -> None:
        succeeds = tasks.add.enqueue(2, 3)
        fails = tasks.fails.enqueue("no")

        run_workers()

        for result in (succeeds, fails):
            result.refresh()
            started, finished = worker_signals(result)
            assert (started["signal"], finished["signal"]) == ("task_started", "task_finished")
            for sent in (started, finished):
                assert sent["sender"] == sender_path(backend)
                assert sent["id"] == result.id
                assert sent["task"] == result.task.module_path
                assert sent["worker_ids"] == result.worker_ids
                assert sent["enqueued_at"] == result.enqueued_at.isoformat()
            assert started["pid"] == finished["pid"]
            assert started["status"] == Status.RUNNING
            assert started["is_finished"] is False
            assert started["attempts"] == 1
            assert started["finished_at"] is None
            assert finished["is_finished"] is True
            assert finished["finished_at"] is not None

        ok, ko = worker_signals(succeeds)[1], worker_signals(fails)[1]
        assert (ok["status"], ok["return_value"], ok["errors"]) == (Status.SUCCESSFUL, 5, [])
        assert ko["status"] == Status.FAILED
        assert ko["errors"] == ["tests.tasks_conformance.tasks.ConformanceError"]

    def test_a_retried_task_sends_both_for_each_attempt(self, run_workers: RunWorkers) -> None:
        result = tasks.fails_first_attempt.enqueue()

        run_workers()

        sent = [(s["signal"], s["status"], s["attempts"]) for s in worker_signals(result)]
        assert sent == [
            ("task_started", Status.RUNNING, 1),
            ("task_finished", Status.READY, 1),  # a retry is scheduled
            ("task_started", Status.RUNNING, 2),
            ("task_finished", Status.SUCCESSFUL, 2),
        ]
