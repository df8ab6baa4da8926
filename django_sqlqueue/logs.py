"""JSON log lines (SQLQUEUE["JSON_LOGS"]): a formatter for any record, and one line per
finished attempt with the job's id, name, queue, attempt, outcome and duration.

`JSONFormatter` renders a record as one JSON object: time, level, logger, pid, message, the
traceback if any, and every field a call passed in `extra` (the attempt lines pass the job's).
Use it in your own LOGGING too: `"()": "django_sqlqueue.logs.JSONFormatter"`.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone
from typing import Any

from .outcomes import CANCELLED, COMPLETED, FAILED, AttemptEnd

#: Logger of the per-attempt lines, so they can be routed apart from the rest.
JOBS_LOGGER = "django_sqlqueue.jobs"

#: Attributes every LogRecord has: anything else on a record came from `extra`.
_STANDARD = frozenset(
    logging.LogRecord("", 0, "", 0, "", None, None).__dict__.keys() | {"message", "asctime"}
)


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, tz=timezone.utc).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname,
            "logger": record.name,
            "pid": record.process,
            "message": record.getMessage(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["traceback"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


#: Level of each outcome's line: successes and cancels are routine, a retry a warning.
LEVELS = {COMPLETED: logging.INFO, CANCELLED: logging.INFO, FAILED: logging.WARNING}


class OutcomeLog:
    """An outcome watcher: one line per finished attempt on `django_sqlqueue.jobs`."""

    def __init__(self) -> None:
        self.logger = logging.getLogger(JOBS_LOGGER)

    def __call__(self, end: AttemptEnd) -> None:
        level = LEVELS.get(end.outcome, logging.ERROR)
        if not self.logger.isEnabledFor(level):
            return
        job = end.job
        fields: dict[str, Any] = {
            "job_id": job.id,
            "job_ref": job.reference,
            "job_name": job.name,
            "queue": job.queue,
            "attempt": job.attempts,
            "max_attempts": job.max_attempts,
            "outcome": end.outcome,
            "duration": None if end.duration is None else round(end.duration, 6),
        }
        if end.error:
            fields["error"] = end.error
        took = "" if end.duration is None else f" in {end.duration * 1000:.1f} ms"
        self.logger.log(
            level,
            "Job %s %s attempt %s: %s%s",
            job.reference,
            job.name,
            job.attempts,
            end.outcome,
            took,
            extra=fields,
        )
