"""Recurring jobs (docs/schedules.md): cron schedules declared in code or settings, stored as
`Schedule` rows, and enqueued by every supervisor, once per tick.

`cron` walks an expression as instants in a time zone, `specs` reads and checks declarations,
`plan` decides which ticks are due: pure code, tested with fixed clocks. `declarations` reads
them from the registry and the settings; `store` syncs them to rows and enqueues ticks. The
supervisor's part is runtime/scheduler.py.

Nothing is imported here: `specs` is imported by the `@job` decorator, before Django's app
registry is ready; `store` needs the models.
"""
