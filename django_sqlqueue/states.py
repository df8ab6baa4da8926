"""The job state machine as plain data and functions: no I/O, tested directly."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.db import models
from django.utils.translation import gettext_lazy as _

#: Priorities run highest first; the range matches django.tasks so they map one to one.
PRIORITY_MIN = -100
PRIORITY_MAX = 100


class Status(models.TextChoices):
    WAITING = "waiting", _("Waiting for dependencies")
    PENDING = "pending", _("Pending")
    RUNNING = "running", _("Running")
    COMPLETED = "completed", _("Completed")
    FAILED = "failed", _("Failed (retry scheduled)")
    DEAD = "dead", _("Dead")
    CANCELLED = "cancelled", _("Cancelled")


@dataclass(frozen=True)
class Transition:
    """One arrow of the state machine: the statuses a change may leave, and where it leads.

    Every UPDATE that changes a status names the `sources` of its transition, so it is safe
    against any other change racing it. Transitions out of `running` are also `fenced`: they
    name the lease owner and attempt they belong to.
    """

    name: str
    sources: tuple[Status, ...]
    targets: tuple[Status, ...]
    fenced: bool = False


#: A worker takes a due job under a lease.
CLAIM = Transition("claim", (Status.PENDING, Status.FAILED), (Status.RUNNING,))
#: The attempt succeeded.
COMPLETE = Transition("complete", (Status.RUNNING,), (Status.COMPLETED,), fenced=True)
#: The attempt failed (or its worker was lost): a retry at a backoff, or the dead letter.
FAIL = Transition("fail", (Status.RUNNING,), (Status.FAILED, Status.DEAD), fenced=True)
#: Handed back unspent: shutdown, or claimed but never started by a worker that died.
RELEASE = Transition("release", (Status.RUNNING,), (Status.PENDING,), fenced=True)
#: The unstarted surplus of a claim, or jobs waiting behind a long one, given back as if never
#: claimed: attempt not spent, place in the queue kept, no history entry.
UNCLAIM = Transition("unclaim", (Status.RUNNING,), (Status.PENDING,), fenced=True)
#: Flow control: a claimed job over its concurrency or rate limit goes back to wait, its
#: attempt not spent, due again when a slot or the allowance is expected to free.
PARK = Transition("park", (Status.RUNNING,), (Status.PENDING,), fenced=True)
#: Flow control: a parked job of a concurrency key becomes due now, because a job of that key
#: left `running` and freed its slot (its status does not change).
WAKE = Transition("wake", (Status.PENDING,), ())
#: Flow control: when the gate finds a rate's allowance spent or a concurrency key's slots all
#: taken, the other due jobs of that rate (the job or queue it counts) or key wait where they
#: are, parked until it frees, so that claims take the jobs behind them (status unchanged).
DEFER = Transition("defer", (Status.PENDING,), ())
#: The `lease_owner` of a parked job, so that WAKE finds parked jobs and never a job that
#: waits for its own `run_at`.
PARKED_OWNER = "(parked)"
#: Workflows: every job a waiting job was enqueued after has finished, completed (or, for a
#: job enqueued with `on_dependency_failure="run"`, in any way): it becomes due now.
READY = Transition("ready", (Status.WAITING,), (Status.PENDING,))
#: Workflows: a job it was enqueued after ended dead or cancelled, so it will not run.
ABANDON = Transition("abandon", (Status.WAITING,), (Status.CANCELLED,))
#: The `lease_owner` of a job cancelled by ABANDON, so that requeueing the dependency that
#: caused it puts the job back to wait (and nothing else it was cancelled for).
ABANDONED_OWNER = "(abandoned)"
#: Workflows: a dependency that caused an ABANDON is requeued, so the jobs it abandoned wait
#: for it again (those with ABANDONED_OWNER, not those a person cancelled).
REWAIT = Transition("rewait", (Status.CANCELLED,), (Status.WAITING,))
#: Staff: a waiting job will not run.
CANCEL = Transition("cancel", (Status.WAITING, Status.PENDING, Status.FAILED), (Status.CANCELLED,))
#: A running job whose cancel was requested stops: its worker records it (fenced), or
#: recovery does if the worker is gone.
STOP = Transition("stop", (Status.RUNNING,), (Status.CANCELLED,), fenced=True)
#: Staff: run a finished or waiting job again from scratch.
REQUEUE = Transition(
    "requeue",
    (Status.DEAD, Status.CANCELLED, Status.FAILED, Status.COMPLETED),
    (Status.PENDING,),
)
#: Staff: a waiting job becomes due now (its status does not change).
RUN_NOW = Transition("run_now", (Status.PENDING, Status.FAILED), ())

ALL_TRANSITIONS = (
    CLAIM,
    COMPLETE,
    FAIL,
    RELEASE,
    UNCLAIM,
    PARK,
    WAKE,
    DEFER,
    READY,
    ABANDON,
    REWAIT,
    CANCEL,
    STOP,
    REQUEUE,
    RUN_NOW,
)
#: The exits from `running`: each is written by the vendor's one fenced door
#: (`QueueDatabase.leave_running`, databases/exits.py).
EXITS = tuple(t for t in ALL_TRANSITIONS if t.fenced)

#: Statuses a worker may claim from (once `run_at` has passed).
CLAIMABLE = CLAIM.sources
#: Statuses that never change again unless a person requeues the job.
FINISHED = (Status.COMPLETED, Status.DEAD, Status.CANCELLED)
#: The same, and every other status, as the values stored (for `status__in` and comparisons
#: with rows read as values).
FINISHED_VALUES = tuple(s.value for s in FINISHED)
UNFINISHED_VALUES = tuple(s.value for s in Status if s not in FINISHED)
#: Statuses `requeue` accepts.
REQUEUEABLE = REQUEUE.sources
#: Statuses `cancel` changes at once (a running job is asked to stop instead).
CANCELLABLE = CANCEL.sources


def _arrows() -> Mapping[str, frozenset[str]]:
    arrows: dict[str, set[str]] = {status: set() for status in Status}
    for transition in ALL_TRANSITIONS:
        for source in transition.sources:
            arrows[source].update(transition.targets)
    return {status: frozenset(targets) for status, targets in arrows.items()}


#: Every status change the code can make, as `status -> statuses it may become`.
TRANSITIONS: Mapping[str, frozenset[str]] = _arrows()


def can_transition(current: str, target: str) -> bool:
    """True if the state machine allows `current` → `target` (docs/states.md)."""
    return target in TRANSITIONS.get(current, frozenset())


def status_after_failure(attempts: int, max_attempts: int, *, gives_up: bool = False) -> Status:
    """The dead-letter rule: a retry while attempts are left, else dead. `gives_up` (a
    discard, an unknown job, an unstorable result) goes dead at once."""
    if gives_up or attempts >= max_attempts:
        return Status.DEAD
    return Status.FAILED


def summarize(counts: Iterable[tuple[str, int]]) -> dict[str, int]:
    """Fold `(status, count)` rows into a dict with every status present, in a stable order."""
    summary = {status.value: 0 for status in Status}
    for status, count in counts:
        summary[status] = summary.get(status, 0) + count
    return summary


def format_summary(summary: Mapping[str, int]) -> str:
    """`pending: 12, running: 3, ...` as `jobstatus` prints it."""
    return ", ".join(f"{status}: {count}" for status, count in summary.items())
