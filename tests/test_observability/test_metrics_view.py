"""The web side's metrics view: who may read it, what it serves, and that it caches."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext, override_settings
from django.utils import timezone

from django_sqlqueue.metrics import views
from django_sqlqueue.models import Job, Worker
from tests.test_admin.helpers import staff_client

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families

URL = "/queue/metrics"
TOKEN = "s3cret-token-for-tests-only"


@pytest.fixture(autouse=True)
def fresh_state():
    views.forget_state()
    yield
    views.forget_state()


def values(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.mark.django_db
def test_anonymous_and_plain_users_are_refused():
    assert Client().get(URL).status_code == 403
    User.objects.create_user("someone", password="x", is_staff=False)
    client = Client()
    client.login(username="someone", password="x")
    assert client.get(URL).status_code == 403
    # Staff without the permission.
    assert staff_client("staff-without").get(URL).status_code == 403


@pytest.mark.django_db
def test_staff_with_view_permission_reads_gauges():
    now = timezone.now()
    for _ in range(3):
        Job.objects.create(name="tests.noop", queue="mail")
    Job.objects.create(name="tests.noop", run_at=now - timedelta(seconds=90))
    Job.objects.create(name="tests.noop", status="dead", finished_at=now)
    Worker.objects.create(id="h:1:a", hostname="h", pid=1, current_job_id=7)
    Worker.objects.create(id="h:2:b", hostname="h", pid=2)
    Worker.objects.create(id="h:3:c", hostname="h", pid=3, last_seen_at=now - timedelta(hours=1))
    response = staff_client("viewer", "view_job").get(URL)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    found = values(response.content.decode())
    assert found[("sqlqueue_jobs", (("queue", "mail"), ("status", "pending")))] == 3
    assert found[("sqlqueue_jobs", (("queue", "default"), ("status", "dead")))] == 1
    assert found[("sqlqueue_oldest_pending_seconds", (("queue", "default"),))] >= 90
    assert found[("sqlqueue_workers", (("state", "busy"),))] == 1
    assert found[("sqlqueue_workers", (("state", "idle"),))] == 1
    assert found[("sqlqueue_workers", (("state", "stale"),))] == 1
    assert found[("sqlqueue_jobs_capped", (("status", "completed"),))] == 0


@pytest.mark.django_db
def test_bearer_token():
    with override_settings(SQLQUEUE={"METRICS_TOKEN": TOKEN}):
        assert Client().get(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 200
        refused = Client().get(URL, HTTP_AUTHORIZATION="Bearer wrong-token-of-some-length")
        assert refused.status_code == 401
        assert refused["WWW-Authenticate"].startswith("Bearer")
        assert Client().get(URL).status_code == 401
    # Without the setting no token is accepted, whatever it says.
    assert Client().get(URL, HTTP_AUTHORIZATION=f"Bearer {TOKEN}").status_code == 403


@pytest.mark.django_db
def test_a_reading_serves_several_scrapes():
    client = staff_client("viewer", "view_job")
    client.get(URL)
    with CaptureQueriesContext(connection) as first:
        client.get(URL)
    views.forget_state()
    with CaptureQueriesContext(connection) as fresh:
        client.get(URL)
    reading = len(fresh) - len(first)
    assert reading == 3, [q["sql"] for q in fresh.captured_queries]


@pytest.mark.django_db
def test_counts_are_bounded():
    from django_sqlqueue.metrics import state

    Job.objects.bulk_create([Job(name="tests.noop", status="completed") for _ in range(12)])
    counts, capped = state.count_by_queue(connection.alias, cap=10)
    assert counts[("default", "completed")] == 11  # read no further than cap + 1
    assert capped == {"completed"}


def test_post_is_refused(client):
    assert client.post(URL).status_code == 405


@pytest.mark.django_db
def test_a_queue_that_empties_reads_zero_instead_of_vanishing():
    """Alerts on sqlqueue_jobs{status="pending"} or the oldest wait must not go to "no data"
    when a queue empties: every status of every known queue is exported, 0 included."""
    job = Job.objects.create(name="tests.noop", queue="emptied")
    client = staff_client("viewer", "view_job")
    found = values(client.get(URL).content.decode())
    assert found[("sqlqueue_jobs", (("queue", "emptied"), ("status", "pending")))] == 1
    assert found[("sqlqueue_jobs", (("queue", "emptied"), ("status", "waiting")))] == 0
    job.delete()
    views.forget_state()
    found = values(client.get(URL).content.decode())
    assert found[("sqlqueue_jobs", (("queue", "emptied"), ("status", "pending")))] == 0
    assert found[("sqlqueue_oldest_pending_seconds", (("queue", "emptied"),))] == 0
    # The default queue is always there, jobs or not.
    assert found[("sqlqueue_jobs", (("queue", "default"), ("status", "pending")))] == 0
