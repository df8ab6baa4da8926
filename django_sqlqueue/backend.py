"""The documented `TASKS` path: `django_sqlqueue.backend.SQLQueueBackend` (see tasks/backend.py)."""

from .tasks.arguments import InvalidTaskArguments
from .tasks.backend import SQLQueueBackend, SQLQueueTask

__all__ = ["InvalidTaskArguments", "SQLQueueBackend", "SQLQueueTask"]
