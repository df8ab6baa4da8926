"""The schedules this deployment declares: every `@job(cron=...)` of the registry and every
SQLQUEUE["SCHEDULES"] entry, with the problems that keep some of them from running."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.utils import timezone

from ..conf import user_settings
from ..registry import JobHandler, registry
from .specs import E_ENTRY, Problem, ScheduleSpec, code_spec, problems, settings_spec


@dataclass
class Declared:
    #: The schedules that can run.
    specs: list[ScheduleSpec] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: Every key declared, runnable or not: a sync leaves the rows of the others alone.
    keys: set[str] = field(default_factory=set)


def find_handler(name: str) -> JobHandler[Any, Any] | None:
    return registry.get(name) if name in registry else None


def declared_schedules(now: datetime | None = None) -> Declared:
    now = now or timezone.now()
    declared = Declared()
    candidates: list[ScheduleSpec] = []
    for name in registry.names():
        handler = registry.get(name)
        options = handler.options
        if options.cron is not None:
            candidates.append(
                code_spec(
                    name,
                    handler.where,
                    cron=options.cron,
                    timezone=options.timezone,
                    missed=options.missed,
                    kwargs=options.cron_kwargs,
                )
            )
    code_keys = {spec.key for spec in candidates}
    raw = user_settings().get("SCHEDULES")
    entries = raw if isinstance(raw, dict) else {}  # another shape is E003's to report
    for key, entry in entries.items():
        spec, found = settings_spec(key, entry)
        declared.problems.extend(found)
        if isinstance(key, str):
            declared.keys.add(key)
        if spec is None:
            continue
        if key in code_keys:
            declared.problems.append(
                Problem(
                    E_ENTRY,
                    f"{spec.label}: the key is the name of a job whose @job declares a "
                    "schedule too; schedule keys must be unique.",
                    "Rename the SCHEDULES entry, or drop cron= from the @job.",
                )
            )
            continue
        candidates.append(spec)
    for spec in candidates:
        declared.keys.add(spec.key)
        found = problems(spec, find_handler, now)
        if found:
            declared.problems.extend(found)
        else:
            declared.specs.append(spec)
    return declared
