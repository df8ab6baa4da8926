"""Helpers of the admin tests: URLs, jobs in any state, staff users with chosen permissions."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.contrib.auth.models import Permission, User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from django_sqlqueue.models import Job
from django_sqlqueue.states import Status

CHANGELIST = "admin:django_sqlqueue_job_changelist"


def changelist_url() -> str:
    return reverse(CHANGELIST)


def change_url(job: Job) -> str:
    return reverse("admin:django_sqlqueue_job_change", args=[job.pk])


def operation_url(job: Job, key: str) -> str:
    return reverse("admin:django_sqlqueue_job_operation", args=[job.pk, key])


def job_in(status: str = Status.PENDING, **fields: Any) -> Job:
    """A job row in `status`, with the timestamps a job in that status would have."""
    now = timezone.now()
    values: dict[str, Any] = {"name": "tests.noop", "queue": "default", "status": status}
    if status in (Status.COMPLETED, Status.DEAD, Status.CANCELLED):
        values.update(started_at=now - timedelta(seconds=3), finished_at=now, attempts=1)
    if status == Status.RUNNING:
        values.update(
            started_at=now,
            attempts=1,
            lease_owner="host:1:w0",
            lease_expires_at=now + timedelta(minutes=1),
        )
    if status == Status.DEAD:
        values.update(last_error="ValueError: boom", attempts=5)
    values.update(fields)
    return Job.objects.create(**values)


def attempt_history(
    steps: tuple[tuple[int, str], ...], *, worker: str, error: str
) -> list[dict[str, Any]]:
    """A job's history: one entry per (attempt, outcome) of `steps`, a minute apart and two
    seconds each, the last ending about seven minutes ago; `error` on each, and as the
    traceback of the `error` outcomes."""
    now = timezone.now()
    return [
        {
            "attempt": attempt,
            "worker": worker,
            "started_at": (now - timedelta(minutes=10 - i)).isoformat(),
            "finished_at": (now - timedelta(minutes=10 - i, seconds=-2)).isoformat(),
            "outcome": outcome,
            "error": error,
            "traceback": error if outcome == "error" else "",
        }
        for i, (attempt, outcome) in enumerate(steps)
    ]


def staff_client(username: str, *codenames: str) -> Client:
    user = User.objects.create_user(username, is_staff=True)  # no password: no slow hashing
    perms = Permission.objects.filter(
        content_type__app_label="django_sqlqueue", codename__in=codenames
    )
    assert perms.count() == len(codenames), codenames
    user.user_permissions.set(perms)
    client = Client()
    client.force_login(user)
    return client


def messages_of(response: Any) -> list[str]:
    return [str(m) for m in response.context["messages"]] if response.context else []
