"""The job state machine and the status summary: pure functions, no database."""

from __future__ import annotations

import itertools

import pytest

from django_sqlqueue.states import (
    CANCELLABLE,
    CLAIMABLE,
    FINISHED,
    REQUEUEABLE,
    Status,
    can_transition,
    format_summary,
    status_after_failure,
    summarize,
)

W, P, R, C, F, D, X = (
    Status.WAITING,
    Status.PENDING,
    Status.RUNNING,
    Status.COMPLETED,
    Status.FAILED,
    Status.DEAD,
    Status.CANCELLED,
)

#: The arrows of docs/states.md, written out independently of states.TRANSITIONS.
ALLOWED = {
    (W, P),  # ready: every job it waits for finished
    (W, X),  # abandon (a job it waits for failed), or cancel
    (X, W),  # rewait: the dependency that abandoned it was requeued
    (P, R),  # claim
    (P, X),  # cancel
    (F, R),  # claim after the backoff
    (F, X),  # cancel
    (F, P),  # requeue
    (R, C),  # success
    (R, F),  # error with attempts left (or an expired lease)
    (R, D),  # attempts spent, discarded
    (R, P),  # released on shutdown
    (R, X),  # stopped: cancelled while running
    (C, P),  # requeue
    (D, P),  # requeue
    (X, P),  # requeue
}


def test_the_seven_statuses() -> None:
    assert [s.value for s in Status] == [
        "waiting",
        "pending",
        "running",
        "completed",
        "failed",
        "dead",
        "cancelled",
    ]


@pytest.mark.parametrize(
    ("current", "target"), list(itertools.product(Status, Status)), ids=lambda s: s.value
)
def test_can_transition_matches_the_design(current: Status, target: Status) -> None:
    assert can_transition(current, target) == ((current, target) in ALLOWED)


def test_can_transition_accepts_plain_strings() -> None:
    assert can_transition("pending", "running")
    assert not can_transition("completed", "running")


def test_unknown_status_goes_nowhere() -> None:
    assert not can_transition("exploded", "pending")
    assert not can_transition("pending", "exploded")


def test_status_groups_agree_with_the_transitions() -> None:
    assert all(can_transition(status, R) for status in CLAIMABLE)
    assert all(can_transition(status, X) for status in CANCELLABLE)
    assert all(can_transition(status, P) for status in REQUEUEABLE)
    assert R not in CANCELLABLE, "a running job is asked to stop, not cancelled at once"
    assert not set(CLAIMABLE) & set(FINISHED)
    # Only a requeue leaves a finished status (and, for a job a failed dependency
    # abandoned, waiting again when that dependency is requeued).
    for status, target in itertools.product(FINISHED, Status):
        assert can_transition(status, target) == (target == P or (status, target) == (X, W))


@pytest.mark.parametrize(
    ("attempts", "max_attempts", "expected"),
    [(1, 5, F), (4, 5, F), (5, 5, D), (6, 5, D), (1, 1, D), (0, 1, F)],
)
def test_status_after_failure(attempts: int, max_attempts: int, expected: Status) -> None:
    assert status_after_failure(attempts, max_attempts) == expected


class TestSummary:
    def test_every_status_is_present_in_order(self) -> None:
        assert summarize([]) == {s.value: 0 for s in Status}
        assert list(summarize([("dead", 1), ("pending", 2)])) == [s.value for s in Status]

    def test_counts_are_added_up(self) -> None:
        summary = summarize([("pending", 2), ("dead", 1), ("pending", 3)])
        assert summary["pending"] == 5
        assert summary["dead"] == 1
        assert summary["running"] == 0

    def test_accepts_enum_members_as_keys(self) -> None:
        assert summarize([(Status.FAILED, 4)])["failed"] == 4

    def test_format_is_what_jobstatus_prints(self) -> None:
        summary = summarize(
            [
                ("pending", 12),
                ("running", 3),
                ("completed", 1458),
                ("failed", 7),
                ("dead", 2),
            ]
        )
        assert format_summary(summary) == (
            "waiting: 0, pending: 12, running: 3, completed: 1458, failed: 7, dead: 2, cancelled: 0"
        )

    def test_format_of_an_empty_queue(self) -> None:
        assert format_summary(summarize([])) == (
            "waiting: 0, pending: 0, running: 0, completed: 0, failed: 0, dead: 0, cancelled: 0"
        )
