"""`django_sqlqueue.chain(a.prepare(...), b.prepare(...), ...)`: jobs that run one after
another, each once the one before has completed (docs/workflows.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction

from .conf import get_settings
from .exceptions import InvalidJobError
from .registry import PreparedJob

if TYPE_CHECKING:
    from .models import Job


class Chain:
    """Steps that `enqueue()` stores in one transaction, each after the one before."""

    def __init__(self, *steps: PreparedJob) -> None:
        if not steps:
            raise InvalidJobError("A chain needs at least one step: chain(a.prepare(), ...).")
        for index, step in enumerate(steps):
            if not isinstance(step, PreparedJob):
                raise InvalidJobError(
                    f"chain() takes prepared jobs (handler.prepare(...)); step {index} is {step!r}."
                )
        self.steps = steps

    def __repr__(self) -> str:
        return f"<Chain of {len(self.steps)} steps>"

    def enqueue(self) -> list[Job]:
        """Store every step, the first as it is, each next one after the one before; all or
        none (in the caller's transaction, if it has one). The jobs, in order."""
        jobs: list[Job] = []
        with transaction.atomic(using=get_settings().database):
            for step in self.steps:
                jobs.append(step.enqueue(after=jobs[-1:]))
        return jobs


def chain(*steps: PreparedJob) -> Chain:
    """A line of jobs, each run once the one before has completed; a step that ends dead or
    cancelled cancels the rest (unless a step's options say `on_dependency_failure="run"`)."""
    return Chain(*steps)
