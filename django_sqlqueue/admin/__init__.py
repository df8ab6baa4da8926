"""The Django admin for jobs and workers (see docs/admin.md)."""

from django.contrib import admin

from ..models import Job, Worker
from .jobs import JobAdmin
from .workers import WorkerAdmin

admin.site.register(Job, JobAdmin)
admin.site.register(Worker, WorkerAdmin)

__all__ = ["JobAdmin", "WorkerAdmin"]
