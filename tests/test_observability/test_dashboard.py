"""The admin dashboard: permissions, a fixed small number of queries, what the charts show."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.metrics import rollups
from django_sqlqueue.models import Job, JobRollup, QueueSample
from tests.test_admin.helpers import changelist_url, staff_client

pytestmark = pytest.mark.django_db

URL_NAME = "admin:django_sqlqueue_dashboard"


def seed(minutes: int = 60) -> None:
    now = timezone.now()
    rows, samples = [], []
    for back in range(minutes):
        minute = rollups.minute_of((now - timedelta(minutes=back)).timestamp())
        for queue in ("default", "mail"):
            rows.append(
                JobRollup(
                    minute=minute,
                    queue=queue,
                    name="app.job",
                    outcome="completed",
                    count=10,
                    duration_sum=2.0,
                    wait_b0=8,
                    wait_b4=2,
                )
            )
            rows.append(
                JobRollup(
                    minute=minute, queue=queue, name="app.job", outcome="failed", count=1, wait_b1=1
                )
            )
            samples.append(QueueSample(minute=minute, queue=queue, pending=back, failed=1))
    JobRollup.objects.bulk_create(rows)
    QueueSample.objects.bulk_create(samples)


def test_needs_the_view_permission():
    url = reverse(URL_NAME)
    assert staff_client("nobody").get(url).status_code == 403
    assert staff_client("viewer", "view_job").get(url).status_code == 200


def test_linked_from_the_job_list():
    page = staff_client("viewer", "view_job").get(changelist_url()).content.decode()
    assert f'href="{reverse(URL_NAME)}"' in page


@pytest.mark.parametrize("window", ["hour", "day"])
def test_few_queries_and_no_job_table(window):
    seed()
    Job.objects.create(name="tests.noop")
    client = staff_client("viewer", "view_job")
    client.get(reverse(URL_NAME))  # sessions, permissions and templates warmed up
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse(URL_NAME), {"range": window})
    assert response.status_code == 200
    statements = [q["sql"] for q in queries.captured_queries]
    ours = [s for s in statements if "django_sqlqueue" in s]
    # The rollup twice (by minute, by queue and name) and the samples; the rest is the admin's own
    # (session, user, permissions), whatever the queue holds.
    assert len(ours) == 3, ours
    assert len(statements) <= 8, statements
    assert all("django_sqlqueue_jobrollup" in s or "django_sqlqueue_queuesample" in s for s in ours)


def test_charts_show_the_rollup():
    seed()
    page = staff_client("viewer", "view_job").get(reverse(URL_NAME)).content.decode()
    assert page.count('<svg class="sq-chart"') == 4
    assert '<script src="http' not in page
    # 60 minutes of 10 completed and 1 failed per queue: bars with tooltips.
    assert re.search(r"completed: 20</title>", page)
    assert "failed, will retry: 2</title>" in page
    # p50 of waits: 16 of 20 under 10 ms per minute.
    assert "p50: " in page
    # The per-queue table, and the job names.
    assert re.search(r">mail</a></th>\s*<td class=\"sq-num\">6\d\d</td>", page)
    assert re.search(
        r">app.job</a></th>\s*<td>default</td>\s*<td class=\"sq-num\">6\d\d</td>", page
    )
    # The day view folds minutes into 10-minute bars.
    day = staff_client("viewer2", "view_job").get(reverse(URL_NAME), {"range": "day"})
    assert "completed: 200</title>" in day.content.decode()


def test_empty_dashboard_renders():
    page = staff_client("viewer", "view_job").get(reverse(URL_NAME)).content.decode()
    assert "No attempt finished in this time." in page
    assert "No queue had jobs waiting in this time." in page
