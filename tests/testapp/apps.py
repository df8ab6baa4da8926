"""The test app's configuration. A worker process spawned by a test may be given another
claim budget, so that whether it claims jobs in batches does not follow this machine's speed,
and a supervisor a shorter interval between its reads of the schedule rows, so that a test
waiting for reads waits less."""

from __future__ import annotations

import os

from django.apps import AppConfig


class TestAppConfig(AppConfig):
    name = "tests.testapp"
    label = "testapp"

    def ready(self) -> None:
        budget = os.environ.get("SQLQUEUE_TEST_CLAIM_BUDGET")
        if budget:
            from django_sqlqueue.runtime import dispatch, worker

            dispatch.CLAIM_BUDGET_SECONDS = worker.CLAIM_BUDGET_SECONDS = float(budget)
        refresh = os.environ.get("SQLQUEUE_TEST_SCHEDULE_REFRESH")
        if refresh:
            from django_sqlqueue.runtime import scheduler

            scheduler.REFRESH_SECONDS = float(refresh)
