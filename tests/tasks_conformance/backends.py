"""A backend that declares none of the optional features, to check that validation honours
the `supports_*` flags even though SQLQueueBackend overrides `validate_task`."""

from __future__ import annotations

from django_sqlqueue.backend import SQLQueueBackend


class WithoutOptionalFeatures(SQLQueueBackend):
    supports_defer = False
    supports_async_task = False
    supports_get_result = False
    supports_priority = False
