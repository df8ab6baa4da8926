"""What each admin action does to jobs, and how its outcome is told to the user.

The actions only ever call `operations` (requeue, cancel, run_now, purge): each
is one conditional UPDATE or DELETE naming the statuses it may change, so a worker claiming
or finishing a job at the same moment wins and the job is reported as skipped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from django.contrib import messages
from django.db.models import QuerySet
from django.utils.functional import Promise
from django.utils.text import get_text_list
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext, ngettext_lazy, pgettext_lazy

from .. import operations
from ..models import Job
from ..states import CANCELLABLE, CLAIMABLE, FINISHED, REQUEUEABLE, Status
from .display import short_status

#: Jobs read and acted on per round trip when a whole filtered selection is acted on.
CHUNK_SIZE = 500


def _cancel(ids: list[int], alias: str) -> int:
    done = operations.cancel_many(ids, alias=alias)
    return done.changed + done.stopping


def _purge(ids: list[int], alias: str) -> int:
    return operations.purge(operations.purgeable(alias=alias).filter(id__in=ids))


@dataclass(frozen=True)
class JobOperation:
    """One action: the statuses it accepts, the permission it needs, the service it calls.

    `done` and `done_some` are plural forms keyed on `count` and `selected`: the message
    after the action, when it changed every selected job and when it changed only some.
    Every action asks for confirmation first, from the list and from a job's page (`yes` is
    the confirming button); `logged` goes to the job's admin history.
    """

    key: str
    label: Promise
    yes: Promise
    done: Promise
    done_some: Promise
    logged: Promise
    allowed: tuple[Status, ...]
    permission: str  # a ModelAdmin has_<permission>_permission method
    help: Promise
    apply: Callable[[list[int], str], int] = field(repr=False)

    def accepts(self, status: str) -> bool:
        return status in self.allowed

    def allowed_text(self) -> str:
        """`Dead, Cancelled, Failed or Completed`, in the active language."""
        return str(get_text_list([short_status(s.value) for s in self.allowed]))


REQUEUE = JobOperation(
    key="requeue",
    label=pgettext_lazy("job action", "Requeue"),
    yes=gettext_lazy("Yes, requeue"),
    done=ngettext_lazy("Requeued %(count)d job.", "Requeued %(count)d jobs.", "count"),
    done_some=ngettext_lazy(
        "Requeued %(count)d of %(selected)d selected job.",
        "Requeued %(count)d of %(selected)d selected jobs.",
        "selected",
    ),
    logged=gettext_lazy("Requeued from the admin (was %(status)s)."),
    allowed=REQUEUEABLE,
    permission="requeue",
    help=gettext_lazy("Back to pending, due now, with its attempts reset to 0."),
    apply=lambda ids, alias: operations.requeue_many(ids, alias=alias).changed,
)
CANCEL = JobOperation(
    key="cancel",
    label=pgettext_lazy("job action", "Cancel"),
    yes=gettext_lazy("Yes, cancel"),
    done=ngettext_lazy("Cancelled %(count)d job.", "Cancelled %(count)d jobs.", "count"),
    done_some=ngettext_lazy(
        "Cancelled %(count)d of %(selected)d selected job.",
        "Cancelled %(count)d of %(selected)d selected jobs.",
        "selected",
    ),
    logged=gettext_lazy("Cancelled from the admin (was %(status)s)."),
    allowed=(*CANCELLABLE, Status.RUNNING),
    permission="cancel",
    help=gettext_lazy(
        "A pending or failed job will not run again (until requeued); a running one is "
        "asked to stop."
    ),
    apply=_cancel,
)
RUN_NOW = JobOperation(
    key="run_now",
    label=pgettext_lazy("job action", "Run now"),
    yes=gettext_lazy("Yes, run now"),
    done=ngettext_lazy("Made %(count)d job due now.", "Made %(count)d jobs due now.", "count"),
    done_some=ngettext_lazy(
        "Made %(count)d of %(selected)d selected job due now.",
        "Made %(count)d of %(selected)d selected jobs due now.",
        "selected",
    ),
    logged=gettext_lazy("Made due now from the admin (was %(status)s)."),
    allowed=CLAIMABLE,
    permission="run_now",
    help=gettext_lazy("A waiting (pending or failed) job becomes due now; its attempts are kept."),
    apply=lambda ids, alias: operations.run_now_many(ids, alias=alias).changed,
)
PURGE = JobOperation(
    key="purge",
    label=pgettext_lazy("job action", "Purge"),
    yes=gettext_lazy("Yes, purge"),
    done=ngettext_lazy("Purged %(count)d job.", "Purged %(count)d jobs.", "count"),
    done_some=ngettext_lazy(
        "Purged %(count)d of %(selected)d selected job.",
        "Purged %(count)d of %(selected)d selected jobs.",
        "selected",
    ),
    logged=gettext_lazy("Purged from the admin (was %(status)s)."),
    allowed=FINISHED,
    permission="purge",
    help=gettext_lazy("Deletes a finished (completed, dead or cancelled) job for good."),
    apply=_purge,
)

OPERATIONS: dict[str, JobOperation] = {op.key: op for op in (REQUEUE, CANCEL, RUN_NOW, PURGE)}

RUNNING_NOTE = gettext_lazy(
    "Running jobs are asked to stop: their handler sees the request within a second and is "
    "interrupted if it has not stopped after CANCEL_GRACE_SECONDS; the job then ends "
    "cancelled. One that completes first stays completed."
)


@dataclass
class ActionReport:
    """What an action did: how many jobs it changed, and the statuses it found on the rest."""

    operation: JobOperation
    changed: int = 0
    seen: Counter[str] = field(default_factory=Counter)

    @property
    def selected(self) -> int:
        return sum(self.seen.values())

    @property
    def eligible(self) -> int:
        return sum(n for status, n in self.seen.items() if self.operation.accepts(status))

    @property
    def refused(self) -> Counter[str]:
        """Statuses the action does not accept, as found when the jobs were read."""
        return Counter({s: n for s, n in self.seen.items() if not self.operation.accepts(s)})

    @property
    def raced(self) -> int:
        """Jobs that were eligible when read but had changed by the time of the update."""
        return self.eligible - self.changed

    @property
    def level(self) -> int:
        if self.changed == 0:
            return messages.WARNING
        return messages.SUCCESS if self.changed == self.selected else messages.WARNING

    def message(self) -> str:
        op = self.operation
        if self.changed == self.selected:
            parts = [op.done % {"count": self.changed}]
        else:
            parts = [op.done_some % {"count": self.changed, "selected": self.selected}]
        refused = self.refused
        if refused:
            total = sum(refused.values())
            breakdown = ", ".join(
                f"{short_status(status)}: {n}" for status, n in sorted(refused.items())
            )
            parts.append(
                ngettext(
                    "Skipped %(count)d job whose status does not allow it (%(statuses)s).",
                    "Skipped %(count)d jobs whose status does not allow it (%(statuses)s).",
                    total,
                )
                % {"count": total, "statuses": breakdown}
            )
            parts.append(
                _("%(action)s accepts only jobs that are %(allowed)s.")
                % {"action": op.label, "allowed": op.allowed_text()}
            )
        if self.raced > 0:
            parts.append(
                ngettext(
                    "Skipped %(count)d job whose status changed meanwhile (a worker claimed "
                    "or finished it first); nothing was done to it.",
                    "Skipped %(count)d jobs whose status changed meanwhile (a worker claimed "
                    "or finished them first); nothing was done to them.",
                    self.raced,
                )
                % {"count": self.raced}
            )
        if op is CANCEL and self.seen.get(Status.RUNNING.value):
            parts.append(str(RUNNING_NOTE))
        return " ".join(str(part) for part in parts)


def apply_to_rows(
    operation: JobOperation, rows: Sequence[tuple[int, str]], alias: str
) -> ActionReport:
    """Act on jobs read as `(id, status)`: only those whose status the action accepts.

    The service re-checks the status in its UPDATE, so a job that changed since it was read
    is left alone and counted as raced.
    """
    outcome = ActionReport(operation, seen=Counter(status for _, status in rows))
    eligible = [job_id for job_id, status in rows if operation.accepts(status)]
    if eligible:
        outcome.changed = operation.apply(eligible, alias)
    return outcome


def id_status_chunks(
    queryset: QuerySet[Job], size: int = CHUNK_SIZE
) -> Iterator[list[tuple[int, str]]]:
    """`(id, status)` of every job in `queryset`, by id, `size` at a time (keyset paging)."""
    base = queryset.order_by("id").values_list("id", "status")
    last = None
    while True:
        page = base.filter(id__gt=last) if last is not None else base
        rows = list(page[:size])
        if not rows:
            return
        yield rows
        last = rows[-1][0]


def apply_to_queryset(operation: JobOperation, queryset: QuerySet[Job]) -> ActionReport:
    """Act on every job in `queryset`, in chunks, so a selection of millions stays bounded."""
    total = ActionReport(operation)
    for rows in id_status_chunks(queryset):
        part = apply_to_rows(operation, rows, queryset.db)
        total.changed += part.changed
        total.seen.update(part.seen)
    return total
