"""Pause and resume queues. A paused queue keeps its jobs and accepts new ones; workers stop
claiming from it within about a second, and jobs already running finish normally."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from ..conf import get_settings
from ..databases import queue_database
from ..models import QueueState
from ..validation import check_queue


def pause_queue(name: str, *, by: str = "", reason: str = "", using: str | None = None) -> bool:
    """Stop workers claiming from queue `name`; True if it was not paused already."""
    alias = using or get_settings().database
    queue = check_queue(name)
    now = timezone.now()
    with transaction.atomic(using=alias):
        state, created = (
            QueueState.objects.using(alias)
            .select_for_update()
            .get_or_create(
                queue=queue, defaults={"paused_at": now, "paused_by": by, "reason": reason}
            )
        )
        if created:
            return True
        if state.paused_at is not None:
            return False
        state.paused_at, state.paused_by, state.reason, state.updated_at = now, by, reason, now
        state.save(using=alias)
    return True


def resume_queue(name: str, *, using: str | None = None) -> bool:
    """Let workers claim from queue `name` again; True if it was paused."""
    alias = using or get_settings().database
    queue = check_queue(name)
    changed = (
        QueueState.objects.using(alias)
        .filter(queue=queue, paused_at__isnull=False)
        .update(paused_at=None, paused_by="", reason="", updated_at=timezone.now())
    )
    if changed:
        queue_database(alias).wake(queue)
    return bool(changed)
