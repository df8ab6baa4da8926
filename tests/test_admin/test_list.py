"""The job list: columns, every filter, search, the summary bar, counts and query counts."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_sqlqueue.admin import JobAdmin, counting
from django_sqlqueue.admin.changelist import ERROR_PREVIEW
from django_sqlqueue.models import Job
from django_sqlqueue.states import Status

from .helpers import changelist_url, job_in

pytestmark = pytest.mark.django_db


def listed_ids(response) -> list[int]:
    return [job.pk for job in response.context["cl"].result_list]


def get_list(client, **params):
    response = client.get(changelist_url(), params)
    assert response.status_code == 200, response.content[:500]
    return response


def test_columns_show_status_badge_attempts_duration_and_short_error(viewer):
    job = job_in(
        Status.DEAD,
        queue="mail",
        priority=5,
        last_error="ValueError: boom\nTraceback follows\n" + "x" * 1000,
        attempts=3,
        max_attempts=3,
    )
    content = get_list(viewer).content.decode()
    assert f'href="/admin/django_sqlqueue/job/{job.pk}/change/"' in content
    assert 'class="sq-badge sq-dead" data-status="dead" title="Dead">Dead</span>' in content
    assert "mail · priority 5" in content  # queue and priority under the name
    assert "3/3 attempts" in content
    assert "took 3.00s" in content  # finished_at - started_at
    [cell] = re.findall(r'<span class="sq-error-line" title="([^"]*)">([^<]*)</span>', content)
    hover, line = cell
    assert line == "ValueError: boom"  # only the first line in the cell
    assert hover.startswith("ValueError: boom\nTraceback follows\nxxx")  # more on hover
    assert len(hover) == ERROR_PREVIEW + 1 and hover.endswith("…")  # what the list reads


def test_a_completed_jobs_earlier_error_is_not_shown_as_a_failure(viewer):
    """A job that failed once and then completed keeps its last error: the list shows it
    quiet, as an earlier attempt's, not in the failure colour; and a job that took a few
    milliseconds says how many, not 0.00s."""
    now = timezone.now()
    job_in(
        Status.COMPLETED,
        attempts=2,
        started_at=now - timedelta(microseconds=4200),
        finished_at=now,
        last_error="ConnectionError: reset by peer",
    )
    content = get_list(viewer).content.decode()
    [(hover, line)] = re.findall(
        r'<span class="sq-error-line sq-error-old" title="([^"]*)">([^<]*)</span>', content
    )
    assert line == "ConnectionError: reset by peer"
    assert hover == "An earlier attempt failed: ConnectionError: reset by peer"
    assert '<span class="sq-error-line" ' not in content
    assert "took 4.2 ms" in content


def test_columns_of_waiting_and_running_jobs(viewer):
    now = timezone.now()
    job_in(Status.FAILED, run_at=now + timedelta(minutes=5))
    job_in(Status.PENDING, run_at=now + timedelta(hours=2))
    job_in(Status.RUNNING, started_at=now - timedelta(seconds=90))
    content = get_list(viewer).content.decode()
    assert "retry in 4m 5" in content  # in 4m 59s, or 4m 58s on a slow machine
    assert "due in 1h 59m" in content
    assert "running 1m 3" in content


def test_list_does_not_load_payload_or_history(viewer):
    job_in(Status.DEAD, args=["secret-arg"], history=[{"attempt": 1, "error": "history-entry"}])
    response = get_list(viewer)
    job = response.context["cl"].result_list[0]
    assert {"args", "kwargs", "result", "history", "last_error"} <= job.get_deferred_fields()


@pytest.mark.parametrize("status", [s.value for s in Status])
def test_status_filter(viewer, status):
    expected = {s.value: job_in(s.value).pk for s in Status}
    assert listed_ids(get_list(viewer, status__exact=status)) == [expected[status]]


def test_queue_filter_lists_known_queues_and_filters(viewer, worker_row):
    mail = job_in(queue="mail")
    job_in(queue="default")
    response = get_list(viewer, queue="mail")
    assert listed_ids(response) == [mail.pk]
    content = response.content.decode()
    assert 'href="?queue=default"' in content  # from the settings' default queue
    assert 'href="?queue=mail"' in content  # from the worker's queues


def test_name_filter_lists_names_from_the_table_and_the_registry(viewer):
    adhoc = job_in(name="reports.nightly")
    job_in(name="tests.add")
    response = get_list(viewer, name="reports.nightly")
    assert listed_ids(response) == [adhoc.pk]
    content = response.content.decode()
    assert 'href="?name=reports.nightly"' in content  # only in the table
    assert 'href="?name=tests.fail_once"' in content  # only in the registry


def test_stuck_filter_finds_running_jobs_past_their_lease(viewer):
    now = timezone.now()
    stuck = job_in(Status.RUNNING, lease_expires_at=now - timedelta(seconds=5))
    job_in(Status.RUNNING, lease_expires_at=now + timedelta(seconds=60))
    job_in(Status.PENDING, lease_expires_at=None)
    assert listed_ids(get_list(viewer, stuck="yes")) == [stuck.pk]


def test_scheduled_filters_split_waiting_jobs_by_run_at(viewer):
    now = timezone.now()
    future = job_in(Status.PENDING, run_at=now + timedelta(hours=1))
    retry_later = job_in(Status.FAILED, run_at=now + timedelta(minutes=5))
    due = job_in(Status.PENDING, run_at=now - timedelta(minutes=1))
    job_in(Status.COMPLETED, run_at=now + timedelta(hours=1))  # finished: neither
    assert sorted(listed_ids(get_list(viewer, scheduled="future"))) == sorted(
        [future.pk, retry_later.pk]
    )
    assert listed_ids(get_list(viewer, scheduled="due")) == [due.pk]


@pytest.mark.parametrize("field", ["created_at", "run_at", "finished_at"])
def test_date_range_filters(viewer, field):
    now = timezone.now()
    old_time = now - timedelta(days=30)
    old = job_in(Status.COMPLETED, **{field: old_time})
    recent = job_in(Status.COMPLETED, **{field: now})
    day = timezone.localtime(old_time).date()
    params = {
        f"{field}__range__gte": (day - timedelta(days=1)).isoformat(),
        f"{field}__range__lte": (day + timedelta(days=1)).isoformat(),
    }
    assert listed_ids(get_list(viewer, **params)) == [old.pk]
    since = {f"{field}__range__gte": (day + timedelta(days=2)).isoformat()}
    assert listed_ids(get_list(viewer, **since)) == [recent.pk]


def test_idempotency_key_link_filter(viewer):
    keyed = job_in(idempotency_key="welcome-42")
    job_in(idempotency_key="welcome-43")
    assert listed_ids(get_list(viewer, idempotency_key="welcome-42")) == [keyed.pk]


@pytest.mark.parametrize(
    "term",
    ["{pk}", "#{pk}", "nightly", "order-7781", "needle-in-args", "needle-in-kwargs", '"in-kwa"'],
)
def test_search_by_id_name_key_and_argument_text(viewer, term):
    target = job_in(
        name="reports.nightly",
        idempotency_key="order-7781",
        args=["needle-in-args"],
        kwargs={"to": "needle-in-kwargs"},
    )
    job_in(name="tests.noop", args=["hay"], kwargs={"to": "stack"})
    response = get_list(viewer, q=term.format(pk=target.pk))
    assert listed_ids(response) == [target.pk]


def test_a_number_is_a_job_id_unless_quoted(viewer):
    by_id = job_in()
    by_argument = job_in(kwargs={"user_id": by_id.pk * 1000 + 4711})
    number = str(by_id.pk * 1000 + 4711)
    assert listed_ids(get_list(viewer, q=str(by_id.pk))) == [by_id.pk]
    assert listed_ids(get_list(viewer, q=number)) == []  # no job has that id
    assert listed_ids(get_list(viewer, q=f'"{number}"')) == [by_argument.pk]


def test_a_huge_number_is_searched_as_text(viewer):
    job_in(args=["99999999999999999999999"])
    assert len(listed_ids(get_list(viewer, q="99999999999999999999999"))) == 1


@pytest.mark.parametrize("term", ["\u00b2", "#\u00b9\u00b2", "\u0664\u0662"])
def test_digits_of_other_kinds_are_searched_as_text(viewer, term):
    """`isdigit()` is true for superscripts, which `int()` refuses with ValueError, and for
    other scripts' digits: a job id is written in ASCII digits."""
    target = job_in(name=f"reports.code{term}")
    job_in(name="reports.other")
    assert listed_ids(get_list(viewer, q=term)) == [target.pk]


def test_more_digits_than_int_reads_are_searched_as_text(viewer):
    """`int()` refuses strings of more than 4,300 digits with ValueError."""
    target = job_in(args=["9" * 5000])
    job_in(args=["hay"])
    assert listed_ids(get_list(viewer, q="9" * 5000)) == [target.pk]


def test_search_is_case_insensitive_in_arguments(viewer):
    target = job_in(kwargs={"email": "Alice@Example.org"})
    job_in(kwargs={"email": "bob@example.org"})
    assert listed_ids(get_list(viewer, q="alice@example")) == [target.pk]


def test_summary_bar_counts_per_status_under_the_other_filters(viewer):
    for _ in range(3):
        job_in(Status.DEAD, queue="mail")
    job_in(Status.PENDING, queue="mail")
    job_in(Status.DEAD, queue="default")
    response = get_list(viewer, queue="mail", status__exact="dead")
    summary = response.context["summary"]
    counts = {item["status"]: item["text"] for item in summary["counts"]}
    assert counts == {
        "waiting": "0",
        "pending": "1",
        "running": "0",
        "completed": "0",
        "failed": "0",
        "dead": "3",
        "cancelled": "0",
    }
    active = [item["status"] for item in summary["counts"] if item["active"]]
    assert active == ["dead"]
    assert len(listed_ids(response)) == 3


def test_summary_bar_shows_the_oldest_due_pending_job(viewer):
    now = timezone.now()
    oldest = job_in(Status.PENDING, run_at=now - timedelta(minutes=10))
    job_in(Status.PENDING, run_at=now - timedelta(minutes=1))
    job_in(Status.PENDING, run_at=now + timedelta(hours=1))  # not due: not waiting
    response = get_list(viewer)
    backlog = response.context["summary"]["backlog"]
    assert backlog.job_id == oldest.pk
    assert response.context["summary"]["backlog_age"].startswith("10m")
    assert "Oldest due pending job" in response.content.decode()


def test_summary_bar_caps_large_counts(monkeypatch):
    from django_sqlqueue.admin import summary

    monkeypatch.setattr(summary, "COUNT_CAP", 3)
    monkeypatch.setattr(summary, "FILTERED_CAP", 2)
    Job.objects.bulk_create([Job(name="tests.noop", status=Status.COMPLETED) for _ in range(5)])
    job_in(Status.DEAD)
    counts = {c.status: c.text for c in summary.status_counts(Job.objects.all())}
    assert (counts["completed"], counts["dead"], counts["pending"]) == ("3+", "1", "0")
    # Under another filter each counted row is read from the table: the cap is lower.
    filtered = summary.status_counts(Job.objects.filter(queue="default"))
    counts = {c.status: c.text for c in filtered}
    assert (counts["completed"], counts["dead"]) == ("2+", "1")


def test_summary_counts_exactly_in_one_pass_under_the_cap(django_assert_num_queries):
    from django_sqlqueue.admin import summary

    for status in ("completed", "completed", "dead", "running"):
        job_in(status)
    with django_assert_num_queries(1):
        counts = {c.status: c.count for c in summary.status_counts(Job.objects.all(), cap=4)}
    assert counts == {
        "waiting": 0,
        "pending": 0,
        "running": 1,
        "completed": 2,
        "failed": 0,
        "dead": 1,
        "cancelled": 0,
    }


def test_pagination_counts_exactly_under_the_cap(viewer):
    Job.objects.bulk_create([Job(name="tests.noop") for _ in range(7)])
    response = get_list(viewer)
    assert response.context["cl"].paginator.count_kind == counting.EXACT
    assert "7 jobs" in response.content.decode()


def test_pagination_above_the_cap_when_filtered_says_more_than(viewer, monkeypatch):
    monkeypatch.setattr(JobAdmin, "list_per_page", 2)
    monkeypatch.setattr(counting.JobPaginator, "cap", 5)
    Job.objects.bulk_create([Job(name="tests.noop", status=Status.DEAD) for _ in range(8)])
    response = get_list(viewer, status__exact="dead")
    cl = response.context["cl"]
    assert cl.paginator.count_kind == counting.AT_LEAST
    assert cl.result_count == 5
    assert "more than 5 jobs" in response.content.decode()


def test_paginator_unfiltered_uses_the_database_estimate_when_it_has_one(viewer, monkeypatch):
    monkeypatch.setattr(counting.JobPaginator, "cap", 5)
    Job.objects.bulk_create([Job(name="tests.noop") for _ in range(8)])
    refresh_statistics()
    estimate = counting.estimated_table_rows(Job, "default")
    paginator = counting.JobPaginator(Job.objects.all(), 2)
    if estimate is None or estimate <= 5:
        # No (fresh enough) statistics: honest "more than".
        assert paginator.count == 5
        assert paginator.count_kind == counting.AT_LEAST
    else:
        assert paginator.count == estimate
        assert paginator.count_kind == counting.ESTIMATE


def refresh_statistics() -> None:
    table = connection.ops.quote_name(Job._meta.db_table)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"ANALYZE {table}")
        elif connection.vendor == "mysql":
            pass  # ANALYZE TABLE commits implicitly, which would end the test's transaction
        else:
            cursor.execute("ANALYZE")


def test_estimated_table_rows_reads_the_statistics():
    Job.objects.bulk_create([Job(name="tests.noop") for _ in range(20)])
    refresh_statistics()
    estimate = counting.estimated_table_rows(Job, "default")
    if connection.vendor == "postgresql":
        # ANALYZE inside the test transaction sees the 20 uncommitted rows.
        assert estimate == 20
    elif connection.vendor == "sqlite":
        assert estimate == 20
    else:
        assert estimate is not None and estimate >= 0


def test_bounded_count_stops_at_the_cap():
    Job.objects.bulk_create([Job(name="tests.noop") for _ in range(12)])
    assert counting.bounded_count(Job.objects.all(), cap=10) == 11
    assert counting.bounded_count(Job.objects.all(), cap=100) == 12


def test_list_query_count_is_bounded_and_independent_of_rows(viewer, worker_row):
    def queries_for(params: dict) -> int:
        with CaptureQueriesContext(connection) as captured:
            get_list(viewer, **params)
        return len(captured)

    job_in(Status.DEAD)
    # Every match on one page: the rows are read once and counted in Python.
    one_page = queries_for({})
    Job.objects.bulk_create(
        [Job(name=f"tests.job{i % 7}", status=Status.COMPLETED) for i in range(150)]
    )
    many = queries_for({})
    Job.objects.bulk_create(
        [Job(name=f"tests.job{i % 7}", status=Status.COMPLETED) for i in range(300)]
    )
    more = queries_for({})
    filtered = queries_for(
        {
            "status__exact": "completed",
            "queue": "default",
            "q": "job",
            "created_at__range__gte": "2000-01-01",
        }
    )
    page_two = queries_for({"p": "2"})
    assert many == more == filtered
    assert one_page < many
    assert page_two <= many
    # session, user, 2 x permissions, workers' queues, names, first page, count, summary,
    # backlog; past COUNT_CAP rows, one more for the table's estimate and one for the
    # per-status counts.
    assert many <= 10


def test_a_search_that_fits_one_page_reads_the_table_once(viewer, worker_row):
    target = job_in(Status.DEAD, kwargs={"order": "needle-77"})
    job_in(Status.COMPLETED, kwargs={"order": "hay"})
    with CaptureQueriesContext(connection) as captured:
        response = get_list(viewer, q="needle-77")
    job_queries = [q["sql"] for q in captured.captured_queries if Job._meta.db_table in q["sql"]]
    names_query = [sql for sql in job_queries if "RECURSIVE" in sql]
    assert len(job_queries) - len(names_query) == 1, job_queries
    assert listed_ids(response) == [target.pk]
    counts = {c["status"]: c["text"] for c in response.context["summary"]["counts"]}
    assert (counts["dead"], counts["completed"]) == ("1", "0")


def test_list_page_query_budget(viewer, worker_row, django_assert_max_num_queries):
    Job.objects.bulk_create([Job(name="tests.noop", status=Status.COMPLETED) for _ in range(120)])
    with django_assert_max_num_queries(12):
        get_list(viewer, status__exact="completed", p="2")


def test_query_budget_holds_past_the_count_cap(viewer, worker_row, monkeypatch):
    from django_sqlqueue.admin import summary

    monkeypatch.setattr(JobAdmin, "list_per_page", 3)
    monkeypatch.setattr(counting.JobPaginator, "cap", 5)
    monkeypatch.setattr(summary, "COUNT_CAP", 5)
    monkeypatch.setattr(summary, "FILTERED_CAP", 5)
    Job.objects.bulk_create([Job(name="tests.noop", status=Status.COMPLETED) for _ in range(12)])
    with CaptureQueriesContext(connection) as captured:
        response = get_list(viewer)
    assert response.context["cl"].paginator.count_kind in (counting.ESTIMATE, counting.AT_LEAST)
    assert {c["status"]: c["text"] for c in response.context["summary"]["counts"]}[
        "completed"
    ] == "5+"
    assert len(captured) <= 12


def test_unfiltered_list_never_counts_the_whole_table(viewer):
    Job.objects.bulk_create([Job(name="tests.noop") for _ in range(3)])
    with CaptureQueriesContext(connection) as captured:
        get_list(viewer)
    table = Job._meta.db_table
    for query in captured.captured_queries:
        sql = query["sql"]
        if "COUNT(" in sql.upper() and table in sql:
            assert "LIMIT" in sql.upper(), sql


def test_default_ordering_is_newest_first(viewer):
    first, second, third = (job_in() for _ in range(3))
    assert listed_ids(get_list(viewer)) == [third.pk, second.pk, first.pk]


def test_invalid_filter_value_does_not_crash(viewer):
    response = viewer.get(changelist_url(), {"created_at__range__gte": "not-a-date"})
    assert response.status_code == 200


def test_without_rangefilter_the_dates_use_djangos_own_filter(viewer, monkeypatch):
    from django.apps import apps

    installed = apps.is_installed
    monkeypatch.setattr(
        apps, "is_installed", lambda name: name != "rangefilter" and installed(name)
    )
    old = job_in(Status.COMPLETED, created_at=timezone.now() - timedelta(days=30))
    recent = job_in(Status.COMPLETED)
    since = (timezone.now() - timedelta(days=6)).isoformat()
    response = get_list(viewer, created_at__gte=since)
    assert listed_ids(response) == [recent.pk]
    assert old.pk not in listed_ids(response)
    assert "Past 7 days" in response.content.decode()


def test_pages_split_the_jobs_newest_first(viewer):
    Job.objects.bulk_create([Job(name="tests.noop") for _ in range(150)])
    ids = list(Job.objects.order_by("-id").values_list("id", flat=True))
    first = get_list(viewer)
    assert listed_ids(first) == ids[:100]
    assert first.context["cl"].paginator.count == 150
    assert listed_ids(get_list(viewer, p="2")) == ids[100:]


def test_running_jobs_show_their_progress_in_the_list(viewer):
    running = job_in(Status.RUNNING, progress=75, progress_message="almost")
    job_in(Status.PENDING)
    content = viewer.get(changelist_url()).content.decode()
    assert 'value="75"' in content and "almost" in content
    assert content.count("sq-progress") == 1, running


def test_a_search_too_long_to_run_matches_nothing_and_says_so(viewer):
    """A 100,000-character term answered 500 on SQLite ("LIKE or GLOB pattern too complex");
    past MAX_TERM_LENGTH it matches nothing, with a message, on every database."""
    from django_sqlqueue.admin.search import MAX_TERM_LENGTH

    job_in(args=["a" * 20])
    response = get_list(viewer, q="a" * 100_000)
    assert response.status_code == 200
    assert listed_ids(response) == []
    assert f"A search is at most {MAX_TERM_LENGTH} characters long" in response.content.decode()
    longest = get_list(viewer, q="a" * MAX_TERM_LENGTH)
    assert longest.status_code == 200 and listed_ids(longest) == []
