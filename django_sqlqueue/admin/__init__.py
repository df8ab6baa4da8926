"""The Django admin for jobs, batches, workers and schedules (see docs/admin.md,
docs/schedules.md)."""

from django.contrib import admin

from ..models import Job, JobBatch, QueueState, Schedule, Worker
from .batches import JobBatchAdmin
from .jobs import JobAdmin
from .queues import QueueStateAdmin
from .schedules import ScheduleAdmin
from .workers import WorkerAdmin

admin.site.register(Job, JobAdmin)
admin.site.register(JobBatch, JobBatchAdmin)
admin.site.register(Worker, WorkerAdmin)
admin.site.register(Schedule, ScheduleAdmin)
admin.site.register(QueueState, QueueStateAdmin)

__all__ = ["JobAdmin", "JobBatchAdmin", "QueueStateAdmin", "ScheduleAdmin", "WorkerAdmin"]
