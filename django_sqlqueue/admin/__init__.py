"""The Django admin for jobs, workers and schedules (see docs/admin.md, docs/schedules.md)."""

from django.contrib import admin

from ..models import Job, QueueState, Schedule, Worker
from .jobs import JobAdmin
from .queues import QueueStateAdmin
from .schedules import ScheduleAdmin
from .workers import WorkerAdmin

admin.site.register(Job, JobAdmin)
admin.site.register(Worker, WorkerAdmin)
admin.site.register(Schedule, ScheduleAdmin)
admin.site.register(QueueState, QueueStateAdmin)

__all__ = ["JobAdmin", "QueueStateAdmin", "ScheduleAdmin", "WorkerAdmin"]
