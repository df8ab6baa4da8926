"""The attempt history counts on across requeues: 1, 2, 3, then a new run from 4, not 1."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from django_sqlqueue.admin.attempt_history import (
    attempts_summary,
    history_rows,
    runs_of,
    starts_new_run,
)
from django_sqlqueue.attempts import AttemptOutcome
from django_sqlqueue.models import Job
from django_sqlqueue.registry import registry
from django_sqlqueue.states import Status
from tests.workers.conftest import WorkerProcesses, wait_for

from .helpers import change_url, job_in, operation_url


def entry(attempt: int, outcome: str = "error") -> dict[str, Any]:
    return {
        "attempt": attempt,
        "worker": "web-1:1:w0",
        "started_at": "2026-01-05T10:00:00+00:00",
        "finished_at": "2026-01-05T10:00:01+00:00",
        "outcome": outcome,
        "error": f"boom {attempt}",
        "traceback": "",
    }


def numbers(rows: list[dict[str, Any]]) -> list[Any]:
    """The page's view of a history: running numbers, and `run N` where a new run starts."""
    return [f"run {row['new_run']}" if "new_run" in row else row["number"] for row in rows]


def test_a_requeue_starts_a_new_run_and_numbers_keep_counting():
    history = [entry(1), entry(2), entry(3), entry(1), entry(2, "completed")]
    rows = history_rows(history)
    assert numbers(rows) == [1, 2, 3, "run 2", 4, 5]
    attempts = [row for row in rows if "number" in row]
    assert [(r["run"], r["stored_attempt"]) for r in attempts] == [
        (1, 1),
        (1, 2),
        (1, 3),
        (2, 1),
        (2, 2),
    ]
    assert rows[3]["after"] == 3  # "requeued after #3"


def test_a_released_attempt_is_retried_under_the_same_number_in_the_same_run():
    """Shutdown hands an attempt back unspent: the next entry carries the same number."""
    history = [entry(1, "released"), entry(1), entry(2, "released"), entry(2), entry(3)]
    assert numbers(history_rows(history)) == [1, 2, 3, 4, 5]
    assert len(runs_of(history)) == 1


def test_a_requeue_after_a_single_attempt_is_seen():
    """Requeued after attempt 1: the next entry is attempt 1 again, not 2."""
    assert starts_new_run(entry(1), entry(1))
    assert not starts_new_run(entry(2), entry(1))
    assert not starts_new_run(entry(1), entry(1, "released"))
    assert numbers(history_rows([entry(1), entry(1), entry(1)])) == [1, "run 2", 2, "run 3", 3]


def test_unreadable_entries_keep_their_place_and_do_not_start_runs():
    history = [entry(1), "garbage", {"attempt": "x"}, entry(2)]
    rows = history_rows(history)
    assert numbers(rows) == [1, 2, 3, 4]
    assert "raw" in rows[1]


def test_attempts_summary_counts_every_run():
    assert attempts_summary(2, 5, [entry(1), entry(2)]) == "2 / 5"
    history = [entry(1), entry(2), entry(3), entry(1, "released"), entry(1), entry(2)]
    assert "(5 attempts in all, over 2 runs)" in attempts_summary(2, 3, history)


@pytest.mark.django_db
def test_the_job_page_numbers_across_requeues(viewer):
    job = job_in(Status.DEAD, history=[entry(1), entry(2), entry(3), entry(1), entry(2)])
    content = viewer.get(change_url(job)).content.decode()
    shown = re.findall(r'<td class="sq-attempt-number" title="([^"]*)">(\d+)</td>', content)
    assert shown == [
        ("attempt 1 of run 1", "1"),
        ("attempt 2 of run 1", "2"),
        ("attempt 3 of run 1", "3"),
        ("attempt 1 of run 2", "4"),
        ("attempt 2 of run 2", "5"),
    ]
    assert content.count('class="sq-run"') == 1
    assert "Requeued after #3: run 2 starts here" in content
    assert "(5 attempts in all, over 2 runs)" in content


# Through real workers and the admin's own requeue: the stored numbers restart, the page's
# numbers do not.


def dead(job: Job) -> Job | None:
    """The job once it is dead: its retries (each after its backoff, 2 s at most) all ran."""
    job.refresh_from_db()
    return job if job.status == Status.DEAD else None


@pytest.mark.workers
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_requeued_job_run_by_workers_keeps_counting_on_its_page(child_env, admin_user, tmp_path):
    client = Client()
    client.force_login(admin_user)
    job = registry.get("tests.fail_always").using(max_attempts=2).enqueue()
    workers = WorkerProcesses(child_env, tmp_path)
    try:
        workers.start("-n", "1")
        job = wait_for(lambda: dead(job), timeout=60)
        response = client.post(operation_url(job, "requeue"), {"confirmed": "yes"})
        assert response.status_code == 302
        job = wait_for(lambda: dead(job), timeout=60)
    finally:
        workers.cleanup()
    assert [e["attempt"] for e in job.history] == [1, 2, 1, 2]  # as the workers stored them
    assert {e["outcome"] for e in job.history} == {AttemptOutcome.ERROR.value}
    content = client.get(change_url(job)).content.decode()
    shown = re.findall(r'<td class="sq-attempt-number" title="[^"]*">(\d+)</td>', content)
    assert shown == ["1", "2", "3", "4"]
    assert "Requeued after #2: run 2 starts here" in content
    assert "boom on attempt 2" in content
