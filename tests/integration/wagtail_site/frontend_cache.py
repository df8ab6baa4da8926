"""A frontend-cache backend that stores each purged URL, so both task modes can be compared."""

from __future__ import annotations

from wagtail.contrib.frontend_cache.backends.base import BaseBackend


class RecordingBackend(BaseBackend):
    """Records purges in `PurgedURL` instead of calling a CDN."""

    def purge(self, url: str) -> None:
        from .models import PurgedURL

        PurgedURL.objects.create(url=url)
