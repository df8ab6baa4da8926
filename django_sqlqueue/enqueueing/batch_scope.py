"""Which batch the jobs enqueued here and now join: the innermost `with batch(...)` block of
this thread or task (django_sqlqueue/batches.py), read by every store path."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_current: ContextVar[int | None] = ContextVar("django_sqlqueue_batch", default=None)


def current_batch_id() -> int | None:
    """The batch a job enqueued now joins (None: none)."""
    return _current.get()


@contextlib.contextmanager
def joining(batch_id: int) -> Iterator[None]:
    """Jobs enqueued inside join `batch_id` (the batch before it again after)."""
    token = _current.set(batch_id)
    try:
        yield
    finally:
        _current.reset(token)
