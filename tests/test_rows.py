"""`ClaimedJob.from_row` unpacks a claimed row by position: each column of CLAIM_COLUMNS
must land in the field of its name, whatever order the tuple is written in."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from django_sqlqueue.rows import CLAIM_COLUMNS, ClaimedJob, to_datetime

#: A distinct value for every claimed column, as a database returns it.
STORED = {
    "id": 11,
    "name": "a_name",
    "queue": "a_queue",
    "args": '[1, "two"]',
    "kwargs": '{"k": 3}',
    "attempts": 2,
    "max_attempts": 7,
    "priority": 5,
    "run_at": "2026-12-04 17:00:00.123456",
    "created_at": "2026-12-03 16:00:00",
    "history": '[{"attempt": 1}]',
    "backend": "a_backend",
    "trace_context": '{"traceparent": "00-x"}',
    "has_dependents": 1,
    "batch_id": 13,
    "ref_nonce": 17,
}

#: What each field must hold after from_row (USE_TZ is on in the test settings).
EXPECTED = {
    **STORED,
    "args": [1, "two"],
    "kwargs": {"k": 3},
    "run_at": datetime(2026, 12, 4, 17, 0, 0, 123456, tzinfo=UTC),
    "created_at": datetime(2026, 12, 3, 16, 0, 0, tzinfo=UTC),
    "history": [{"attempt": 1}],
    "trace_context": {"traceparent": "00-x"},
    "has_dependents": True,
}


def row_of(stored: dict[str, object]) -> tuple[object, ...]:
    """The tuple a claim returns for these column values, in CLAIM_COLUMNS order."""
    return tuple(stored[column] for column in CLAIM_COLUMNS)


def test_every_claimed_column_lands_in_its_own_field() -> None:
    assert set(STORED) == set(CLAIM_COLUMNS)
    job = ClaimedJob.from_row(row_of(STORED), "owner", None)
    for column in CLAIM_COLUMNS:
        assert getattr(job, column) == EXPECTED[column], column
    assert job.lease_owner == "owner"


def test_empty_json_columns_and_nulls() -> None:
    stored = {**STORED, "args": "[]", "history": "[]", "trace_context": None, "backend": None}
    job = ClaimedJob.from_row(row_of(stored), "owner")
    assert (job.args, job.history, job.trace_context, job.backend) == ([], [], None, "")
    job.args.append(1)  # each row gets a list of its own
    again = ClaimedJob.from_row(row_of(stored), "owner")
    assert again.args == []


def test_a_row_of_another_length_is_refused() -> None:
    with pytest.raises(ValueError):
        ClaimedJob.from_row(row_of(STORED)[:-1], "owner")


def test_to_datetime_without_use_tz_keeps_a_naive_value() -> None:
    assert to_datetime("2026-12-04 17:00:00", use_tz=False).tzinfo is None
    with pytest.raises(ValueError, match="not a datetime"):
        to_datetime("yesterday")
