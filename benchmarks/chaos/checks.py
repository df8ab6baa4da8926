"""The guarantees of docs/guarantees.md, checked against what a run left behind.

Each check is a function of the Evidence that returns a Check: a name, whether it held, one
line of figures, and a few examples when it did not. Pure functions: the tests feed them
made-up evidence to show that each one does fail when its guarantee is broken.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

from .batches import CHECKS as BATCH_CHECKS
from .effects import (
    atomic_executions_killed,
    atomic_jobs,
    check_atomic_counter,
    check_rerun_budget,
    kill_figures,
    transaction_broken_by_fault,
)
from .evidence import Evidence, timestamp
from .facts import (
    FAULT_TAIL_SECONDS,
    RECLAIM_SLACK_SECONDS,
    RECORDED,
    TAKEN_AWAY,
    TRANSACTION_MODES,
    TROUBLE_EVENTS,
    Check,
    Facts,
    reclaim_bound,
)
from .facts import examples as _examples
from .mix import COMPLETED, ERROR, KINDS, TIMEOUT, expected_outcome
from .workflows import CHECKS as WORKFLOW_CHECKS
from .workflows import abandoned

#: A supervisor given SIGTERM exits within its grace period, the interrupt grace, and this.
SHUTDOWN_SLACK_SECONDS = 10.0
LOCK_ERRORS = re.compile(r"database is locked|deadlock|lock wait timeout", re.I)


def check_terminal(f: Facts) -> Check:
    statuses = Counter(job.status for job in f.ev.jobs)
    unfinished = [j for j in f.ev.jobs if j.status not in ("completed", "dead", "cancelled")]
    detail = (
        f"{len(f.ev.jobs) - len(unfinished)}/{len(f.ev.jobs)} "
        f"(completed {statuses['completed']}, dead {statuses['dead']}); "
        f"drained in {f.ev.drain_seconds:.1f} s"
    )
    return Check(
        "every committed job reached a terminal state",
        not unfinished and f.ev.drained,
        detail,
        _examples(f"job {j.id} {j.kind} is {j.status}" for j in unfinished),
    )


def check_none_running(f: Facts) -> Check:
    running = [j for j in f.ev.jobs if j.status == "running"]
    return Check(
        "no job stuck running",
        not running,
        f"{len(running)} running after the drain",
        _examples(f"job {j.id} attempt {j.attempts}" for j in running),
    )


def check_no_job_lost(f: Facts) -> Check:
    expected = {i["token"] for i in f.committed_items() if not i.get("dedup")}
    missing = sorted(expected - set(f.jobs_by_token))
    doubled = sorted(t for t, rows in f.jobs_by_token.items() if len(rows) > 1)
    unaccounted = sorted(set(f.jobs_by_token) - expected)
    return Check(
        "no job lost",
        not (missing or doubled or unaccounted),
        f"{len(expected)} committed enqueues, {len(missing)} missing, {len(doubled)} stored "
        f"twice, {len(unaccounted)} rows no committed enqueue accounts for",
        _examples(
            [f"missing {t}" for t in missing]
            + [f"twice {t}" for t in doubled]
            + [f"unaccounted {t}" for t in unaccounted]
        ),
    )


def check_rollbacks_never_ran(f: Facts) -> Check:
    tokens = {i["token"] for i in f.rolled_back_items()}
    stored = sorted(tokens & set(f.jobs_by_token))
    ran = sorted(tokens & f.executed_tokens)
    explicit = sum(1 for u in f.rolled_back_units if u["outcome"] == "rolled_back")
    return Check(
        "rolled-back enqueues never ran",
        not (stored or ran),
        f"{len(tokens)} enqueues rolled back ({explicit} transactions on purpose, "
        f"{len(f.rolled_back_units) - explicit} failed), {len(stored)} stored, {len(ran)} ran",
        _examples([f"stored {t}" for t in stored] + [f"ran {t}" for t in ran]),
    )


def check_transactions_atomic(f: Facts) -> Check:
    """Business row and enqueued jobs of one transaction: all committed or none."""
    broken = []
    transactions = 0
    for unit in f.ev.units:
        if unit["mode"] not in TRANSACTION_MODES:
            continue
        transactions += 1
        order = unit["tx"] in f.ev.orders
        tokens = [i["token"] for i in unit["jobs"] if not i.get("dedup") and "id" in i]
        present = [t in f.jobs_by_token for t in tokens]
        committed = unit["tx"] in f.committed_tx
        if unit["outcome"] == "error" and not tokens:
            present = [order]  # failed before any enqueue: nothing to compare
        if order != committed or any(p != order for p in present):
            broken.append(f"{unit['tx']} ({unit['outcome']}): order {order}, jobs {present}")
    return Check(
        "transactional enqueue: jobs and business rows commit or roll back together",
        not broken,
        f"{transactions} transactions, {len(broken)} disagree",
        _examples(broken),
    )


def check_attempts(f: Facts) -> Check:
    over = [
        j
        for j in f.ev.jobs
        if j.attempts > j.max_attempts
        or any(entry["attempt"] > j.max_attempts for entry in j.history)
        or (j.kind in KINDS and j.max_attempts != KINDS[j.kind].max_attempts)
    ]
    most = max((j.attempts for j in f.ev.jobs), default=0)
    return Check(
        "attempts <= max_attempts",
        not over,
        f"{len(over)} over, highest attempt count {most}",
        _examples(f"job {j.id}: {j.attempts}/{j.max_attempts}" for j in over),
    )


def check_history(f: Facts) -> Check:
    """Every recorded outcome is what the handler does on that attempt; completed is last."""
    wrong = []
    broken = 0
    for job in f.ev.jobs:
        for index, entry in enumerate(job.history):
            outcome = entry.get("outcome")
            where = f"job {job.id} {job.kind} attempt {entry.get('attempt')}: {outcome}"
            if transaction_broken_by_fault(f, job, entry):
                broken += 1
            elif outcome in RECORDED:
                expected = expected_outcome(job.kind, entry["attempt"], job.kwargs)
                if outcome != expected:
                    wrong.append(f"{where}, expected {expected}")
                elif outcome == ERROR and "HandlerFailure" not in entry.get("error", ""):
                    wrong.append(f"{where} with an unplanned error: {entry.get('error')}")
                elif outcome == COMPLETED and index != len(job.history) - 1:
                    wrong.append(f"{where} is not the last entry")
            elif outcome not in TAKEN_AWAY:
                wrong.append(f"{where} is not an outcome this run can produce")
    entries = sum(len(j.history) for j in f.ev.jobs)
    return Check(
        "recorded outcomes match the handlers (at most one completion, always last)",
        not wrong,
        f"{entries} history entries, {len(wrong)} wrong; {broken} atomic attempts failed by "
        "a database fault (rolled back, retried)",
        _examples(wrong),
    )


def check_dead(f: Facts) -> Check:
    by_design = by_kills = 0
    wrong = []
    for job in f.ev.jobs:
        last = job.history[-1] if job.history else {}
        always_fails = job.kind in ("doomed", "hang")
        if job.status == "dead":
            spent = last.get("attempt") == job.max_attempts
            if spent and last.get("outcome") in (ERROR, TIMEOUT) and always_fails:
                by_design += 1
            elif spent and (
                last.get("outcome") == "lost" or transaction_broken_by_fault(f, job, last)
            ):
                by_kills += 1
            else:
                wrong.append(f"job {job.id} {job.kind} dead after {last}")
        elif job.status == "completed":
            if always_fails or last.get("outcome") != COMPLETED:
                wrong.append(f"job {job.id} {job.kind} completed after {last}")
        elif always_fails and not abandoned(job):
            # A workflow step cancelled because a job it waits for failed never ran: the
            # workflow checks look at those.
            wrong.append(f"job {job.id} {job.kind} should be dead but is {job.status}")
    return Check(
        "dead jobs are exactly those that should be dead",
        not wrong,
        f"{by_design + by_kills} dead: {by_design} always-failing jobs, {by_kills} whose "
        f"last attempt was lost to a kill or fault; {len(wrong)} wrong",
        _examples(wrong),
    )


def double_executions(f: Facts) -> tuple[Counter[str], list[str]]:
    """Jobs whose handler started more often than the queue recorded an outcome."""
    kinds: Counter[str] = Counter()
    wrong = []
    for job in f.ev.jobs:
        executions = f.executions.get(job.id, [])
        recorded = sum(1 for e in job.history if e.get("outcome") in RECORDED)
        taken = [e for e in job.history if e.get("outcome") in TAKEN_AWAY]
        excess = len(executions) - recorded
        if excess < 0:
            wrong.append(f"job {job.id}: {recorded} outcomes but {len(executions)} executions")
        elif excess > 0:
            if excess > len(taken):
                wrong.append(
                    f"job {job.id} {job.kind}: ran {len(executions)} times, {recorded} "
                    f"recorded, only {len(taken)} attempts taken away"
                )
            elif any(e.pid in f.killed_pids for e in executions):
                kinds["its worker was killed"] += 1
            elif any(e.get("outcome") == "lost" for e in taken):
                kinds["its worker lost the lease"] += 1
            else:
                kinds["it was handed back at shutdown"] += 1
    return kinds, wrong


def check_double_executions(f: Facts) -> Check:
    kinds, wrong = double_executions(f)
    attributed = ", ".join(f"{n} {why}" for why, n in kinds.most_common()) or "none"
    return Check(
        "double executions only where a worker was killed or lost its job",
        not wrong,
        f"{sum(kinds.values())} jobs ran more often than recorded, all attributable "
        f"({attributed}); {len(wrong)} unattributed"
        if not wrong
        else f"{len(wrong)} unattributed double executions ({attributed} attributable)",
        _examples(wrong),
    )


def check_no_concurrent_runs(f: Facts) -> Check:
    """Two executions of one job overlap only if the first worker had lost its lease."""
    overlaps = allowed = 0
    wrong = []
    for job_id, executions in f.executions.items():
        ordered = sorted(executions, key=lambda e: e.started)
        for first, second in itertools.pairwise(ordered):
            if first.finished is None or second.started >= first.finished:
                continue
            overlaps += 1
            job = f.jobs_by_id.get(job_id)
            lost_by = {
                e.get("worker") for e in (job.history if job else []) if e.get("outcome") == "lost"
            }
            if first.worker_id in lost_by:
                allowed += 1
            else:
                wrong.append(f"job {job_id}: pid {first.pid} and pid {second.pid} overlapped")
    return Check(
        "no job ran on two live workers at once",
        not wrong,
        f"{overlaps} overlapping executions, {allowed} after the first worker lost its lease",
        _examples(wrong),
    )


def check_idempotency(f: Facts) -> Check:
    by_key: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for item in f.committed_items():
        if item.get("key"):
            by_key[item["key"]].append(item)
    rows_by_key = Counter(j.key for j in f.ev.jobs if j.key)
    wrong = []
    for key, items in by_key.items():
        ids = {i["id"] for i in items if "id" in i}
        ids |= {row.id for i in items if not i.get("dedup") for row in f.jobs_by_token[i["token"]]}
        originals = [i for i in items if not i.get("dedup")]
        if len(ids) != 1 or len(originals) != 1 or rows_by_key[key] != 1:
            wrong.append(
                f"{key}: job ids {sorted(ids)}, {len(originals)} stored, {rows_by_key[key]} rows"
            )
    enqueues = sum(len(items) for items in by_key.values())
    dedups = sum(1 for items in by_key.values() for i in items if i.get("dedup"))
    return Check(
        "idempotency keys never produced two jobs",
        not wrong,
        f"{len(by_key)} keys, {enqueues} committed keyed enqueues, {dedups} deduplicated, "
        f"{len(wrong)} keys with more than one job",
        _examples(wrong),
    )


def reclaim_latencies(f: Facts) -> dict[str, list[float]]:
    """Seconds from each kill to the recovery of each job its victim held."""
    latencies: dict[str, list[float]] = defaultdict(list)
    for job in f.ev.jobs:
        for entry in job.history:
            worker_id = entry.get("worker", "")
            if entry.get("outcome") != "lost" or worker_id not in f.killed_ids:
                continue
            killed, how = f.killed_ids[worker_id]
            recovered = timestamp(entry.get("finished_at")) or killed
            label = f"{how} SIGKILL"
            if f.in_fault(killed, recovered):
                label = "SIGKILL during a database fault"
            latencies[label].append(recovered - killed)
    return latencies


def check_reclaim(f: Facts) -> Check:
    bound = reclaim_bound(f.ev.lease)
    latencies = reclaim_latencies(f)
    measured = latencies.get("worker SIGKILL", []) + latencies.get("supervisor SIGKILL", [])
    worst = max(measured, default=0.0)
    parts = [
        f"{label}: {len(values)} jobs, max {max(values):.2f} s"
        for label, values in sorted(latencies.items())
    ]
    return Check(
        "reclaim latency after a kill within the lease bound",
        worst <= bound,
        f"max {worst:.2f} s (bound {bound:.1f} s = lease {f.ev.lease:g} s + housekeeping "
        f"+ {RECLAIM_SLACK_SECONDS:g} s); " + ("; ".join(parts) or "no job was held by a victim"),
    )


def producer_errors(f: Facts) -> tuple[list[str], int, list[str]]:
    locked, during_fault, other = [], 0, []
    for unit in f.ev.units:
        if unit["outcome"] != "error":
            continue
        message = f"{unit['tx']}: {unit.get('error', '')}"
        if LOCK_ERRORS.search(unit.get("error", "")):
            locked.append(message)
        elif f.in_fault(unit["started"], unit["ended"], tail=FAULT_TAIL_SECONDS):
            during_fault += 1
        else:
            other.append(message)
    return locked, during_fault, other


def check_producer_errors(f: Facts) -> Check:
    locked, during_fault, other = producer_errors(f)
    return Check(
        "no database-is-locked or deadlock error surfaced to a producer",
        not locked and not other,
        f"{len(locked)} lock errors, {len(other)} other errors, {during_fault} connection "
        f"errors during the injected database fault (expected)",
        _examples(locked + other),
    )


def check_shutdowns(f: Facts, grace: float, interrupt_grace: float) -> Check:
    exits = [e for e in f.ev.events if e["type"] == "supervisor_exit" and e["how"] != "sigkill"]
    limit = grace + interrupt_grace + SHUTDOWN_SLACK_SECONDS
    wrong = [e for e in exits if e["code"] != 0 or e["seconds"] > limit or e["how"] == "crash"]
    slowest = max((e["seconds"] for e in exits), default=0.0)
    return Check(
        "supervisors given SIGTERM exited cleanly and in time",
        not wrong,
        f"{len(exits)} stopped, slowest {slowest:.1f} s (limit {limit:g} s), {len(wrong)} failed",
        _examples(
            f"{e['supervisor']} ({e['how']}): exit {e['code']} after {e['seconds']:.1f} s"
            for e in wrong
        ),
    )


def check_faults_happened(f: Facts) -> Check:
    """A run in which the planned faults did not happen proves nothing."""
    counts = Counter(e["type"] for e in f.ev.events)
    problems = [e["type"] for e in f.ev.events if e["type"] in TROUBLE_EVENTS]
    if not counts["kill_worker"]:
        problems.append("no worker was killed")
    if not counts["kill_supervisor"]:
        problems.append("no supervisor was killed")
    if not counts["term_supervisor"]:
        problems.append("no supervisor was stopped")
    if atomic_jobs(f)[0] and not atomic_executions_killed(f):
        problems.append("no worker was killed inside an atomic job")
    kills = kill_figures(f)
    if f.ev.concurrency > 1 and kills["most_in_flight_at_a_kill"] < 2:
        # The promise of --concurrency is about the jobs in flight together in one process.
        problems.append("no kill met two or more jobs in flight in one process")
    busy = sum(1 for e in f.ev.events if e["type"] == "kill_worker" and e.get("busy"))
    batches = sum(1 for e in f.ev.events if e.get("aimed_at") == "batch")
    held = "holding two or more jobs" if f.ev.concurrency > 1 else "holding a batch"
    in_flight = (
        f", {kills['jobs_in_flight_at_kills']} jobs in flight in the killed processes at their "
        f"kill (at most {kills['most_in_flight_at_a_kill']} in one)"
        if f.ev.concurrency > 1
        else ""
    )
    return Check(
        "the harness did what it planned",
        not problems,
        f"{counts['kill_worker']} worker SIGKILLs ({busy} busy, {batches} {held}), "
        f"{counts['kill_supervisor']} "
        f"supervisor SIGKILLs, {counts['term_supervisor']} supervisor SIGTERMs, "
        f"{counts['db_fault']} database faults, {counts['start_supervisor']} supervisor starts, "
        f"{atomic_executions_killed(f)} atomic jobs killed mid-transaction{in_flight}",
        _examples(problems),
    )


CHECKS: tuple[Callable[[Facts], Check], ...] = (
    check_faults_happened,
    check_terminal,
    check_no_job_lost,
    check_rollbacks_never_ran,
    check_transactions_atomic,
    check_none_running,
    check_attempts,
    check_history,
    check_dead,
    check_double_executions,
    check_rerun_budget,
    check_atomic_counter,
    check_no_concurrent_runs,
    check_idempotency,
    check_reclaim,
    check_producer_errors,
    *WORKFLOW_CHECKS,
    *BATCH_CHECKS,
)


def run_checks(ev: Evidence, grace: float, interrupt_grace: float) -> list[Check]:
    facts = Facts(ev)
    results = [check(facts) for check in CHECKS]
    results.append(check_shutdowns(facts, grace, interrupt_grace))
    return results
