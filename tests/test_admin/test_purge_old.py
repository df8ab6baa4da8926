"""The "purge finished jobs older than N days" form."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.models import Job
from django_sqlqueue.states import Status

from .helpers import job_in, messages_of

pytestmark = pytest.mark.django_db

URL = "admin:django_sqlqueue_job_purge_old"


@pytest.fixture
def history():
    now = timezone.now()
    old = now - timedelta(days=10)
    return {
        "old_completed": job_in(Status.COMPLETED, finished_at=old),
        "old_dead": job_in(Status.DEAD, finished_at=old),
        "old_cancelled_mail": job_in(Status.CANCELLED, finished_at=old, queue="mail"),
        "new_completed": job_in(Status.COMPLETED, finished_at=now - timedelta(days=1)),
        "old_failed": job_in(Status.FAILED, finished_at=old),  # never purged: not finished
        "pending": job_in(Status.PENDING),
    }


def remaining(history) -> set[str]:
    ids = set(Job.objects.values_list("pk", flat=True))
    return {name for name, job in history.items() if job.pk in ids}


def test_form_is_shown(purger):
    response = purger.get(reverse(URL))
    assert response.status_code == 200
    content = response.content.decode()
    assert 'name="days"' in content and 'value="7"' in content
    assert "Count the jobs to purge" in content


def test_first_post_counts_and_asks_for_confirmation(purger, history):
    data = {"days": "7", "statuses": ["completed", "dead", "cancelled"]}
    response = purger.post(reverse(URL), data)
    content = response.content.decode()
    assert "<strong>3</strong> jobs match" in content
    assert "Yes, purge them" in content
    assert len(remaining(history)) == 6


def test_confirmed_purge_deletes_old_finished_jobs_only(purger, history):
    data = {"days": "7", "statuses": ["completed", "dead", "cancelled"], "confirmed": "yes"}
    response = purger.post(reverse(URL), data, follow=True)
    assert remaining(history) == {"new_completed", "old_failed", "pending"}
    [message] = messages_of(response)
    assert message == (
        "Purged 3 jobs: Completed, Dead or Cancelled jobs that finished more than 7 days ago."
    )


def test_purge_limited_to_statuses_and_queue(purger, history):
    data = {"days": "7", "statuses": ["cancelled"], "queue": "mail", "confirmed": "yes"}
    purger.post(reverse(URL), data)
    assert "old_cancelled_mail" not in remaining(history)
    assert len(remaining(history)) == 5


def test_invalid_form_purges_nothing(purger, history):
    response = purger.post(
        reverse(URL), {"days": "-1", "statuses": ["pending"], "confirmed": "yes"}
    )
    assert response.status_code == 200
    assert "errorlist" in response.content.decode()
    assert len(remaining(history)) == 6
