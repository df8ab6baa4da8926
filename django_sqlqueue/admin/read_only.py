"""Admin pages that show rows others write: jobs (enqueue, workers), workers (their
heartbeats), batches (`batch(...)`). Staff act on them through the actions, never by
editing a row."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


class ReadOnlyAdminMixin:
    """No add, change or delete: the page shows the row, the actions change it."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
