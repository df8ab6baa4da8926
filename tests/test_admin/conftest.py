"""Fixtures of the admin tests: staff users with chosen permissions, a worker row."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from django_sqlqueue.models import Worker

from .helpers import staff_client


@pytest.fixture
def viewer(db: Any) -> Client:
    """Staff who may look at jobs and workers but change nothing."""
    return staff_client("viewer", "view_job", "view_worker")


@pytest.fixture
def changer(db: Any) -> Client:
    """Staff with the change permission: requeue, cancel and run now, but not purge."""
    return staff_client("changer", "view_job", "change_job", "view_worker")


@pytest.fixture
def purger(db: Any) -> Client:
    """Staff with the delete permission only: purge, nothing else."""
    return staff_client("purger", "view_job", "delete_job")


@pytest.fixture
def worker_row(db: Any) -> Worker:
    return Worker.objects.create(id="host:1:w0", hostname="host", pid=1, queues="default,mail")
