"""The admin's plain pieces: outcome messages, chunked actions, display helpers, name scan."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

import pytest
from django.contrib import messages

from django_sqlqueue import operations
from django_sqlqueue.admin import actions, display
from django_sqlqueue.admin.actions import CANCEL, PURGE, REQUEUE, ActionReport
from django_sqlqueue.admin.filters import distinct_names
from django_sqlqueue.attempts import AttemptOutcome
from django_sqlqueue.models import Job
from django_sqlqueue.states import Status

from .helpers import job_in


def test_message_when_everything_changed():
    outcome = ActionReport(REQUEUE, changed=3, seen=Counter({"dead": 2, "cancelled": 1}))
    assert outcome.message() == "Requeued 3 jobs."
    assert outcome.level == messages.SUCCESS


def test_message_lists_refused_statuses_and_raced_jobs():
    outcome = ActionReport(CANCEL, changed=4, seen=Counter({"pending": 2, "running": 3, "dead": 1}))
    assert outcome.refused == Counter({"dead": 1})
    assert outcome.raced == 1
    text = outcome.message()
    assert text.startswith("Cancelled 4 of 6 selected jobs.")
    assert "Skipped 1 job whose status does not allow it (Dead: 1)." in text
    assert "Cancel accepts only jobs that are Waiting, Pending, Failed or Running." in text
    assert "Skipped 1 job whose status changed meanwhile" in text
    assert str(actions.RUNNING_NOTE) in text
    assert outcome.level == messages.WARNING


def test_nothing_changed_is_a_warning():
    outcome = ActionReport(PURGE, changed=0, seen=Counter({"pending": 1}))
    assert outcome.level == messages.WARNING
    assert outcome.message().startswith("Purged 0 of 1 selected job.")


@pytest.mark.django_db
def test_a_stale_read_is_reported_as_raced_not_acted_on(alias):
    """The job was read as completed; someone requeued it before the purge ran."""
    job = job_in(Status.COMPLETED)
    stale_rows = [(job.pk, "completed")]
    operations.requeue_many([job.pk], alias=alias)
    outcome = actions.apply_to_rows(PURGE, stale_rows, alias)
    assert (outcome.changed, outcome.raced) == (0, 1)
    assert Job.objects.get(pk=job.pk).status == "pending"


@pytest.mark.django_db
def test_chunks_cover_every_job_once_in_id_order():
    jobs = [job_in(Status.DEAD) for _ in range(7)]
    chunks = list(actions.id_status_chunks(Job.objects.all(), size=3))
    assert [len(c) for c in chunks] == [3, 3, 1]
    assert [row[0] for chunk in chunks for row in chunk] == [j.pk for j in jobs]


@pytest.mark.django_db
def test_apply_to_queryset_in_chunks(monkeypatch):
    monkeypatch.setattr(actions, "CHUNK_SIZE", 2)
    for _ in range(5):
        job_in(Status.DEAD)
    job_in(Status.RUNNING)
    outcome = actions.apply_to_queryset(REQUEUE, Job.objects.all())
    assert (outcome.changed, outcome.selected) == (5, 6)
    assert Job.objects.filter(status="pending").count() == 5


@pytest.mark.django_db
def test_distinct_names_walks_the_index(alias):
    for name in ["b.job", "a.job", "c.job", "a.job", "b.job"]:
        job_in(name=name)
    assert distinct_names(alias) == ["a.job", "b.job", "c.job"]
    assert distinct_names(alias, limit=2) == ["a.job", "b.job"]


@pytest.mark.django_db
def test_distinct_names_of_an_empty_table(alias):
    assert distinct_names(alias) == []


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (None, "-"),
        (0, "0 µs"),
        (0.000_85, "850 µs"),
        (0.004_2, "4.2 ms"),
        (0.009_94, "9.9 ms"),
        (0.01, "0.01s"),
        (0.25, "0.25s"),
        (42, "42s"),
        (200, "3m 20s"),
        (3 * 3600 + 120, "3h 02m"),
        (3 * 86400 + 4 * 3600, "3d 4h"),
        (-5, "-5.00s"),
    ],
)
def test_human_seconds(seconds, text):
    assert display.human_seconds(seconds) == text


def test_relative_times():
    now = datetime(2026, 1, 1, 12, 0, tzinfo=dt_timezone.utc)
    assert display.relative(now - timedelta(minutes=3), now) == "3m 00s ago"
    assert display.relative(now + timedelta(hours=1), now) == "in 1h 00m"
    assert display.relative(now, now) == "now"


def test_first_line_of_an_error():
    assert display.first_line("ValueError: x\nTraceback...") == "ValueError: x"
    assert display.first_line("") == ""
    assert display.first_line("a" * 200, 10) == "a" * 9 + "…"


@pytest.mark.parametrize(
    ("line", "short"),
    [
        ("shop.jobs.SupplierUnavailable: timed out", "SupplierUnavailable: timed out"),
        ("builtins.ValueError", "ValueError"),
        ("ValueError: a.b.C: x", "ValueError: a.b.C: x"),
        ("Worker web-1.example.org stopped", "Worker web-1.example.org stopped"),
        ("see docs.example.org: it says", "see docs.example.org: it says"),
    ],
)
def test_short_error_drops_the_exception_module_path(line, short):
    assert display.short_error(line) == short


def test_every_status_and_outcome_has_a_translatable_label():
    assert set(display.SHORT_STATUS_LABELS) == {s.value for s in Status}
    assert set(display.OUTCOME_LABELS) == {o.value for o in AttemptOutcome}


def test_status_badge_escapes_unknown_values():
    assert 'class="sq-badge sq-dead"' in display.status_badge("dead")
    assert "&lt;x&gt;" in display.status_badge("<x>")


def test_parse_moment_of_history_timestamps():
    parsed = display.parse_moment("2026-01-05T10:00:02.500000+00:00")
    assert parsed == datetime(2026, 1, 5, 10, 0, 2, 500000, tzinfo=dt_timezone.utc)
    assert display.parse_moment("garbage") is None
    assert display.parse_moment(None) is None
