"""The base class JobAdmin's mixins are type-checked against.

Each mixin (actions, purge form, detail page) calls ModelAdmin methods it does not define
itself: JobAdmin gets them from `admin.ModelAdmin`, last in its bases. To the type checker the
mixins derive from `ModelAdmin[Job]`, so those calls and their overrides are checked; at run
time they derive from `object` and the method resolution order is JobAdmin's own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from django.contrib import admin
    from django.http import HttpRequest

    from ..models import Job

    class JobAdminBase(admin.ModelAdmin[Job]):
        """ModelAdmin[Job], and what one mixin calls of another."""

        def has_purge_permission(self, request: HttpRequest, obj: Job | None = None) -> bool:
            """JobActionsMixin's; the purge form asks it too."""
            raise NotImplementedError

else:
    JobAdminBase = object
