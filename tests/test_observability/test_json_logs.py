"""JSON_LOGS: one JSON line per finished attempt, with the job's fields."""

from __future__ import annotations

import json
import logging

import pytest

from django_sqlqueue import outcomes
from django_sqlqueue.logs import JOBS_LOGGER, JSONFormatter, OutcomeLog
from django_sqlqueue.models import Job
from django_sqlqueue.runtime.worker import JobWorker, WorkerOptions
from tests.testapp.jobs import fail_always, noop

pytestmark = pytest.mark.django_db(transaction=True)


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JSONFormatter())
        self.lines: list[dict] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(json.loads(self.format(record)))


@pytest.fixture
def lines():
    handler = Lines()
    logger = logging.getLogger(JOBS_LOGGER)
    logger.addHandler(handler)
    outcomes.watch(OutcomeLog())
    yield handler.lines
    outcomes.unwatch_all()
    logger.removeHandler(handler)


def test_one_line_per_attempt(lines):
    job = noop.enqueue()
    failing = fail_always.using(max_attempts=1).enqueue()
    JobWorker("json-worker", WorkerOptions(burst=True)).work()
    by_id = {line["job_id"]: line for line in lines}
    done = by_id[job.pk]
    assert done["job_name"] == "tests.noop"
    assert done["queue"] == "default"
    assert done["attempt"] == 1
    assert done["outcome"] == "completed"
    assert done["level"] == "INFO"
    # Seconds the handler ran, as its worker measured them: within the attempt on its row.
    row = Job.objects.get(pk=job.pk)
    assert 0 <= done["duration"] <= (row.finished_at - row.started_at).total_seconds()
    dead = by_id[failing.pk]
    assert dead["outcome"] == "dead" and dead["level"] == "ERROR"
    assert "error" in dead
    assert len(lines) == 2


def test_formatter_renders_any_record_with_traceback():
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        import sys

        record = logging.LogRecord("x", logging.ERROR, __file__, 1, "a %s", ("b",), sys.exc_info())
    line = json.loads(JSONFormatter().format(record))
    assert line["message"] == "a b"
    assert "RuntimeError: boom" in line["traceback"]


def test_runworkers_prints_json(spawn_django, settings):
    """The whole path: runworkers with JSON_LOGS and no LOGGING of its own."""
    child = spawn_django(
        """
        from django.conf import settings
        from django.core.management import call_command
        import logging
        logging.getLogger("django_sqlqueue").handlers.clear()
        settings.SQLQUEUE = {**settings.SQLQUEUE, "JSON_LOGS": True}
        from tests.testapp.jobs import noop
        noop.enqueue()
        call_command("runworkers", "--burst")
        """
    )
    _, err = child.communicate(timeout=120)
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert lines, err
    finished = [line for line in lines if line.get("outcome") == "completed"]
    assert len(finished) == 1, err
    assert finished[0]["logger"] == JOBS_LOGGER
