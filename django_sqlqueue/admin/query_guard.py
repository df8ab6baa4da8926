"""Query strings a database cannot take: answered with a 400, never a 500.

PostgreSQL refuses a NUL character in any text it is given (a DataError, and a 500 page) —
and a user can type one into a URL (`?queue=%00`). No stored value contains one (enqueue
refuses them), so such a filter or search could never match anything anyway.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest

if TYPE_CHECKING:
    from django.contrib import admin

    ModelAdminBase = admin.ModelAdmin[Any]
else:
    ModelAdminBase = object


def unstorable_query(request: HttpRequest) -> HttpResponse | None:
    """A 400 for a query string with a NUL character in a name or a value; else None."""
    for key, values in request.GET.lists():
        if any("\x00" in text for text in (key, *values)):
            return HttpResponseBadRequest(
                "A NUL character (%00) is not allowed in the query.", content_type="text/plain"
            )
    return None


class QueryGuardMixin(ModelAdminBase):
    """Refuse, with a 400, a list query the database could not run."""

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        refused = unstorable_query(request)
        if refused is not None:
            return refused
        return super().changelist_view(request, extra_context)
