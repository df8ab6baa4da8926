"""The kinds of job a producer enqueues, and what each should do on a given attempt.

Pure data and functions shared by producers (what to enqueue), handlers (how to behave) and
the checks (what outcome each attempt should have had).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

COMPLETED, ERROR, TIMEOUT = "completed", "error", "timeout"
BAD_RESULT = "bad_result"


@dataclass(frozen=True)
class Kind:
    name: str
    job_name: str
    weight: float
    max_attempts: int
    timeout: float | None = None
    keyed: bool = False


KINDS = {
    kind.name: kind
    for kind in (
        Kind("fast", "chaos.fast", 0.44, 4),
        Kind("slow", "chaos.slow", 0.08, 4),
        Kind("flaky", "chaos.flaky", 0.14, 4),
        Kind("doomed", "chaos.doomed", 0.05, 3),
        Kind("hang", "chaos.hang", 0.01, 2, timeout=1.0),
        Kind("keyed", "chaos.fast", 0.20, 4, keyed=True),
        Kind("atomic", "chaos.atomic", 0.08, 4),
        # Only with --concurrency C > 1: IO_SHARE of the jobs, drawn apart (choose_kind).
        Kind("io", "chaos.io", 0.0, 4),
    )
}
KIND_OF_JOB = {kind.job_name: kind for kind in KINDS.values() if not kind.keyed}

#: A hanging handler sleeps this long; its timeout stops it much sooner.
HANG_SECONDS = 30.0
#: An atomic job holds its transaction open this long after its increment (seconds, drawn
#: per job), so that kills and connection cuts land between its write and its commit.
ATOMIC_HOLD_SECONDS = (0.01, 0.1)
#: With --concurrency C > 1, this share of the jobs waits (a call to another service, say),
#: so that each worker process has several jobs in flight when a kill lands; C = 1 keeps the
#: mix above unchanged.
IO_SHARE = 0.4
#: The waits are drawn around a mean chosen to keep about this share of all slots busy with
#: them (io_seconds), within these bounds (seconds).
IO_TARGET_BUSY = 0.5
IO_MEAN_BOUNDS = (0.5, 8.0)
#: Keyed enqueues in the same window of this many seconds share their idempotency key,
#: so producers race each other (and their own rollbacks) for the same key.
KEY_WINDOW_SECONDS = 1.0


@dataclass
class Planned:
    """One enqueue a producer is about to make."""

    kind: str
    token: str
    params: dict[str, Any] = field(default_factory=dict)
    key: str | None = None


#: Workflows (docs/workflows.md): a producer's workflow unit stores a chain of CHAIN_STEPS
#: steps (`django_sqlqueue.chain`) or a diamond a -> b, c -> d (`.using(after=[...])`), its
#: steps drawn from WORKFLOW_KINDS and run by the mix's handlers. A doomed step ends dead,
#: so the steps after it are cancelled without running; in RUN_ON_FAILURE_SHARE of the
#: workflows the last step is enqueued with on_dependency_failure="run" and runs anyway.
CHAIN, DIAMOND = "chain", "diamond"
CHAIN_STEPS = (2, 4)
WORKFLOW_KINDS = {"fast": 0.55, "flaky": 0.15, "slow": 0.1, "atomic": 0.1, "doomed": 0.1}
RUN_ON_FAILURE_SHARE = 0.25


@dataclass
class Step(Planned):
    """One job of a workflow: the tokens of the jobs of its workflow it waits for."""

    after: list[str] = field(default_factory=list)
    run_on_failure: bool = False


def plan_workflow(
    rng: random.Random, lease: float, token: Callable[[], str]
) -> tuple[str, list[Step]]:
    """A workflow's shape and its steps, each after the steps it waits for (in order)."""
    shape = rng.choice([CHAIN, CHAIN, DIAMOND])
    count = rng.randint(*CHAIN_STEPS) if shape == CHAIN else 4
    steps = []
    for _ in range(count):
        name = rng.choices(list(WORKFLOW_KINDS), weights=list(WORKFLOW_KINDS.values()))[0]
        steps.append(Step(name, token(), params_for(KINDS[name], rng, lease)))
    if shape == CHAIN:
        for before, step in itertools.pairwise(steps):
            step.after = [before.token]
    else:
        a, b, c, d = steps
        b.after = c.after = [a.token]
        d.after = [b.token, c.token]
    steps[-1].run_on_failure = rng.random() < RUN_ON_FAILURE_SHARE
    return shape, steps


#: Batches (docs/workflows.md): a producer's batch unit stores BATCH_SIZE jobs of the kinds of
#: the workflows (doomed ones end dead, atomic ones hold their transaction) inside `with
#: batch(on_complete=...)`, whose callback, a fast job of its own handler (BATCH_CALLBACK),
#: is stored once every member has finished. In BATCH_MANY_SHARE of the batches the fast
#: members are stored by one `enqueue_many`.
BATCH_SIZE = (3, 12)
BATCH_CALLBACK = "chaos.batch_done"
BATCH_MANY_SHARE = 0.5


def plan_batch(rng: random.Random, lease: float, token: Callable[[], str]) -> list[Planned]:
    """A batch's members."""
    members = []
    for _ in range(rng.randint(*BATCH_SIZE)):
        name = rng.choices(list(WORKFLOW_KINDS), weights=list(WORKFLOW_KINDS.values()))[0]
        members.append(Planned(name, token(), params_for(KINDS[name], rng, lease)))
    return members


def io_seconds(slots: int, jobs_per_second: float) -> tuple[float, float]:
    """The range of an io job's wait, for `slots` slots in all (supervisors x workers x C) and
    producers enqueueing `jobs_per_second`: by Little's law, IO_SHARE of the jobs waiting a
    mean of m seconds keep jobs_per_second * IO_SHARE * m slots busy."""
    mean = IO_TARGET_BUSY * slots / max(jobs_per_second * IO_SHARE, 1e-9)
    mean = min(max(mean, IO_MEAN_BOUNDS[0]), IO_MEAN_BOUNDS[1])
    return round(mean * 0.5, 3), round(mean * 1.5, 3)


def choose_kind(rng: random.Random, io_share: float = 0.0) -> Kind:
    """A kind of the mix; with `io_share`, that share of io jobs first (without it the draws
    are those of a run before io jobs existed)."""
    if io_share and rng.random() < io_share:
        return KINDS["io"]
    kinds = [k for k in KINDS.values() if k.weight]
    return rng.choices(kinds, weights=[k.weight for k in kinds])[0]


def params_for(
    kind: Kind, rng: random.Random, lease: float, io_range: tuple[float, float] = (0.5, 1.5)
) -> dict[str, Any]:
    """Handler arguments: how long a slow job sleeps, how often a flaky job fails first, how
    long an atomic job keeps its transaction open, how long an io job waits."""
    if kind.name == "io":
        return {"seconds": round(rng.uniform(*io_range), 3)}
    if kind.name == "slow":
        # Mostly well under the lease; one in ten outlives it, so the heartbeat must keep it.
        long = rng.random() < 0.1
        seconds = rng.uniform(lease * 1.1, lease * 1.5) if long else rng.uniform(0.2, 1.5)
        return {"seconds": round(seconds, 3)}
    if kind.name == "flaky":
        return {"fail_first": rng.choice([1, 1, 2])}
    if kind.name == "atomic":
        return {"hold": round(rng.uniform(*ATOMIC_HOLD_SECONDS), 3)}
    return {}


def expected_outcome(kind: str, attempt: int, params: dict[str, Any]) -> str:
    """What the handler of `kind` does on `attempt`, if nothing interrupts it."""
    if kind == "doomed":
        return ERROR
    if kind == "hang":
        return TIMEOUT
    if kind == "flaky" and attempt <= int(params.get("fail_first", 0)):
        return ERROR
    return COMPLETED


def key_for(now: float, run: str) -> str:
    return f"{run}-key-{int(now / KEY_WINDOW_SECONDS)}"
