"""The checks of a `--misbehave` run (misbehave.py): the guarantees of a normal run that hold
without kills, and what misbehaving handlers may and may not cost.

Pure functions of the Evidence, like checks.py: tests feed them made-up runs.
"""

from __future__ import annotations

import dataclasses
from collections import Counter, defaultdict
from collections.abc import Callable

from . import checks
from .batches import CHECKS as BATCH_CHECKS
from .effects import check_atomic_counter
from .evidence import Evidence, JobRow, timestamp
from .facts import RECORDED, TAKEN_AWAY, TROUBLE_EVENTS, Check, Facts, examples
from .misbehave import DEAD, LOST, MISBEHAVING, RELEASED, SLOT_GAP_SECONDS, expected_end
from .mix import COMPLETED, KINDS
from .workflows import CHECKS as WORKFLOW_CHECKS
from .workflows import abandoned

#: os._exit(0) in a handler is recovered at once: within this share of the lease (recovery by
#: lease expiry would take most of a lease, and say that the lease was not renewed).
EXIT_RECOVERY_LEASES = 0.5


def normal_part(ev: Evidence) -> Evidence:
    """The run's evidence restricted to normal jobs (for the normal run's per-kind checks)."""
    jobs = [j for j in ev.jobs if j.kind in KINDS]
    ids = {j.id for j in jobs}
    return dataclasses.replace(
        ev, jobs=jobs, executions=[e for e in ev.executions if e.job_id in ids]
    )


#: Misbehaving kinds that end their worker process. The jobs it held beside the one that
#: ended it then go back as after any crash: those that had started in other slots (under
#: --concurrency C) spend an attempt ("lost"); those claimed but not started, which a worker
#: holds at any concurrency (it claims up to BATCH_SIZE at once), go back unspent
#: ("released", docs/workers.md).
PROCESS_ENDING = ("exit0",)


def process_endings(f: Facts) -> dict[str, list[float]]:
    """Worker id → when process-ending handlers started in it (its process ended there)."""
    endings: dict[str, list[float]] = defaultdict(list)
    for e in f.ev.executions:
        if e.kind in PROCESS_ENDING and e.worker_id:
            endings[e.worker_id].append(e.started)
    return endings


def ended_beside(f: Facts, job: JobRow, endings: dict[str, list[float]]) -> list[dict]:
    """The attempts of `job` taken away because a process-ending handler ended the worker
    process that held them (`endings`, from `process_endings`): taken away in that worker,
    recovered within the bound an exit's recovery has. Only under --concurrency can one have
    started beside the exit (`lost`); at any concurrency one may have been claimed and not
    started (`released`)."""
    if job.kind in PROCESS_ENDING:
        return []
    excused = TAKEN_AWAY if f.ev.concurrency > 1 else (RELEASED,)
    bound = f.ev.lease * EXIT_RECOVERY_LEASES
    beside = []
    for item in job.history:
        recovered = timestamp(item.get("finished_at"))
        if item.get("outcome") not in excused or recovered is None:
            continue
        if any(0 <= recovered - ended <= bound for ended in endings.get(item.get("worker"), [])):
            beside.append(item)
    return beside


def check_misbehaviour_happened(f: Facts) -> Check:
    """A run in which the misbehaving handlers did not run, or the GIL-bound one did not
    outlast its lease, proves nothing."""
    ran = Counter(f.jobs_by_id[e.job_id].kind for e in f.ev.executions if e.job_id in f.jobs_by_id)
    problems = [f"no {kind} job ran" for kind in MISBEHAVING if not ran[kind]]
    gil = [e.finished - e.started for e in f.ev.executions if e.kind == "gil" and e.finished]
    longest = max(gil, default=0.0)
    if ran["gil"] and longest <= f.ev.lease:
        problems.append(f"no GIL-bound handler outlasted the lease ({longest:.1f} s)")
    problems += [e["type"] for e in f.ev.events if e["type"] in TROUBLE_EVENTS]
    runs = ", ".join(f"{kind} {ran[kind]}" for kind in MISBEHAVING)
    return Check(
        "every misbehaving handler ran",
        not problems,
        f"executions: {runs}; longest GIL hold {longest:.1f} s (lease {f.ev.lease:g} s)",
        examples(problems),
    )


def check_misbehaving_ends(f: Facts) -> Check:
    ends: Counter[str] = Counter()
    wrong = []
    endings = process_endings(f)
    for job in f.ev.jobs:
        if job.kind not in MISBEHAVING:
            continue
        want = expected_end(job.kind)
        beside = ended_beside(f, job, endings)
        own = [e for e in job.history if e not in beside]
        outcomes = [e.get("outcome") for e in own]
        spent = sum(1 for e in beside if e.get("outcome") == LOST)
        # A job that fails every attempt has fewer left after those spent beside an exit.
        attempts = want.attempts - spent if want.status == DEAD else want.attempts
        problem = ""
        if spent >= MISBEHAVING[job.kind].max_attempts and job.status == DEAD and not own:
            pass  # every attempt was spent beside a process-ending handler
        elif job.status != want.status or outcomes != [want.outcome] * attempts:
            problem = f"{job.status} after {outcomes}"
        for entry in own:
            if want.error not in entry.get("error", ""):
                problem = f"error {entry.get('error', '')[:120]!r}"
            elif not str(entry.get("exception", "")).endswith(want.exception):
                problem = f"exception {entry.get('exception')!r}"
        if problem:
            wrong.append(f"job {job.id} {job.kind}: {problem}; expected {want}")
        else:
            ends[f"{job.kind} {job.status}"] += 1
    listed = ", ".join(f"{n} {k}" for k, n in sorted(ends.items()))
    return Check(
        "each misbehaving job ended as documented, with its error",
        not wrong,
        f"{sum(ends.values())} as documented ({listed}); {len(wrong)} not",
        examples(wrong),
    )


def exit_recoveries(f: Facts) -> list[float]:
    """Seconds from the start of each `os._exit(0)` attempt to its recovery."""
    seconds = []
    for job in f.ev.jobs:
        if job.kind != "exit0":
            continue
        for execution in f.executions.get(job.id, []):
            for entry in job.history:
                same = (entry.get("worker"), entry.get("attempt")) == (
                    execution.worker_id,
                    execution.attempt,
                )
                recovered = timestamp(entry.get("finished_at"))
                if same and entry.get("outcome") == "lost" and recovered is not None:
                    seconds.append(recovered - execution.started)
    return seconds


def check_exit_recovered_at_once(f: Facts) -> Check:
    bound = f.ev.lease * EXIT_RECOVERY_LEASES
    seconds = exit_recoveries(f)
    slow = [s for s in seconds if s > bound]
    return Check(
        "os._exit(0) in a handler is recovered at once, not at lease expiry",
        bool(seconds) and not slow,
        f"{len(seconds)} attempts recovered, max {max(seconds, default=0):.2f} s after they "
        f"started (bound {bound:g} s, half the lease)",
        examples(f"{s:.2f} s" for s in slow),
    )


def check_normal_exactly_once(f: Facts) -> Check:
    """Nothing kills a worker in this run: a normal job is never taken from its worker, never
    runs more often than its outcomes say, and completes once unless it always fails."""
    wrong = []
    # A workflow step cancelled because a job it waits for failed never ran, as it should
    # (the workflow checks look at those).
    normal = [j for j in f.ev.jobs if j.kind in KINDS and not abandoned(j)]
    completed = ended_beside_exits = 0
    endings = process_endings(f)
    for job in normal:
        beside = ended_beside(f, job, endings)
        ended_beside_exits += len(beside)
        taken = [
            e.get("outcome")
            for e in job.history
            if e.get("outcome") in TAKEN_AWAY and e not in beside
        ]
        recorded = sum(1 for e in job.history if e.get("outcome") in RECORDED)
        # An attempt lost beside an exit may have started its handler or not yet.
        lost_beside = sum(1 for e in beside if e.get("outcome") == LOST)
        runs = len(f.executions.get(job.id, []))
        completions = sum(1 for e in job.history if e.get("outcome") == COMPLETED)
        completed += completions
        should_complete = job.kind not in ("doomed", "hang")
        if taken:
            wrong.append(f"job {job.id} {job.kind}: attempts taken away {taken}")
        elif not recorded <= runs <= recorded + lost_beside:
            wrong.append(f"job {job.id} {job.kind}: ran {runs} times, {recorded} outcomes")
        elif completions != int(should_complete):
            wrong.append(f"job {job.id} {job.kind}: {completions} completions")
    shown = f.ev.concurrency > 1 or ended_beside_exits
    beside = f"; {ended_beside_exits} attempts ended beside an exit" if shown else ""
    return Check(
        "normal jobs ran exactly once per recorded attempt, completed once",
        not wrong,
        f"{len(normal)} normal jobs, {completed} completions, {len(wrong)} wrong{beside}",
        examples(wrong),
    )


def slot_gaps(ev: Evidence, wanted: int) -> tuple[dict[str, float], dict[str, int], int]:
    """Per supervisor: the longest stretch (s) with fewer than `wanted` live workers after it
    first had them all, and its last count; and the number of samples."""
    samples = [e for e in ev.events if e["type"] == "slots"]
    longest: dict[str, float] = defaultdict(float)
    last: dict[str, int] = {}
    full_once: set[str] = set()
    short_since: dict[str, float] = {}
    for sample in samples:
        for name, count in sample["counts"].items():
            last[name] = count
            if count >= wanted:
                full_once.add(name)
                short_since.pop(name, None)
            elif name in full_once:
                since = short_since.setdefault(name, sample["t"])
                longest[name] = max(longest[name], sample["t"] - since)
    return dict(longest), last, len(samples)


def check_slots(f: Facts, wanted: int) -> Check:
    longest, last, samples = slot_gaps(f.ev, wanted)
    wrong = [
        f"{name}: {seconds:.1f} s short of workers"
        for name, seconds in longest.items()
        if seconds > SLOT_GAP_SECONDS
    ]
    wrong += [
        f"{name}: {n} of {wanted} workers at the end" for name, n in last.items() if n != wanted
    ]
    worst = max(longest.values(), default=0.0)
    return Check(
        "no worker slot lost: each supervisor keeps its live workers",
        bool(samples) and not wrong,
        f"{samples} counts of {wanted} per supervisor; longest short stretch {worst:.1f} s "
        f"(bound {SLOT_GAP_SECONDS:g} s); at the end {dict(sorted(last.items()))}",
        examples(wrong),
    )


def run_misbehave_checks(
    ev: Evidence, grace: float, interrupt_grace: float, workers: int
) -> list[Check]:
    facts = Facts(ev)
    normal = Facts(normal_part(ev))
    every: tuple[Callable[[Facts], Check], ...] = (
        check_misbehaviour_happened,
        checks.check_terminal,
        checks.check_no_job_lost,
        checks.check_rollbacks_never_ran,
        checks.check_transactions_atomic,
        checks.check_none_running,
        checks.check_attempts,
        check_normal_exactly_once,
        check_misbehaving_ends,
        check_exit_recovered_at_once,
        checks.check_double_executions,
        check_atomic_counter,
        checks.check_no_concurrent_runs,
        checks.check_idempotency,
        checks.check_producer_errors,
        *WORKFLOW_CHECKS,
        *BATCH_CHECKS,
    )
    results = [check(facts) for check in every]
    results.insert(8, checks.check_history(normal))
    results.insert(9, checks.check_dead(normal))
    results.append(check_slots(facts, workers))
    results.append(checks.check_shutdowns(facts, grace, interrupt_grace))
    return results
