"""Print a run's figures and checks, one line each, and keep them as JSON for the docs."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .batches import batch_figures
from .checks import Check, Facts, double_executions, reclaim_latencies
from .effects import atomic_jobs, kill_budget, kill_figures, reruns
from .evidence import Evidence
from .facts import TRANSACTION_MODES
from .workflows import workflow_figures


def handed_back_after_running(ev: Evidence) -> tuple[int, int]:
    """(entries handed back as never started, how many of those had in fact run): the
    supervisor cannot tell a batch's unstarted jobs from those run but not yet recorded."""
    ran = {(e.job_id, e.worker_id, e.attempt) for e in ev.executions}
    unstarted = [
        (job.id, entry.get("worker"), entry.get("attempt"))
        for job in ev.jobs
        for entry in job.history
        if entry.get("outcome") == "released" and "before starting" in entry.get("error", "")
    ]
    return len(unstarted), sum(1 for key in unstarted if key in ran)


def figures(ev: Evidence) -> dict[str, Any]:
    facts = Facts(ev)
    committed_items = list(facts.committed_items())
    kinds = Counter(i["kind"] for i in committed_items if not i.get("dedup"))
    statuses = Counter(j.status for j in ev.jobs)
    events = Counter(e["type"] for e in ev.events)
    doubled, _ = double_executions(facts)
    latencies = reclaim_latencies(facts)
    outcomes = Counter(e.get("outcome") for j in ev.jobs for e in j.history)
    unstarted, unstarted_but_ran = handed_back_after_running(ev)
    rerun_causes = Counter(r.cause for r in reruns(facts))
    atomic_total, atomic_completed = atomic_jobs(facts)
    return {
        "database": ev.vendor,
        "seconds": ev.seconds,
        "lease_seconds": ev.lease,
        "concurrency": ev.concurrency,
        "jobs": len(ev.jobs),
        "jobs_by_kind": dict(sorted(kinds.items())),
        "completed": statuses["completed"],
        "dead": statuses["dead"],
        "units": len(ev.units),
        "transactions": sum(1 for u in ev.units if u["mode"] in TRANSACTION_MODES),
        "bursts": sum(1 for u in ev.units if u["mode"] == "burst"),
        "rolled_back_enqueues": sum(len(u["jobs"]) for u in facts.rolled_back_units),
        "deduplicated": sum(1 for i in committed_items if i.get("dedup")),
        "producer_errors": sum(1 for u in ev.units if u["outcome"] == "error"),
        "executions": len(ev.executions),
        "worker_pids": len({e.pid for e in ev.executions}),
        "outcomes": dict(sorted(outcomes.items())),
        "worker_kills": events["kill_worker"],
        "worker_kills_busy": sum(1 for e in ev.events if e["type"] == "kill_worker" and e["busy"]),
        "supervisor_kills": events["kill_supervisor"],
        "supervisor_sigterms": events["term_supervisor"],
        "db_faults": events["db_fault"],
        "db_fault_modes": sorted({e["mode"] for e in ev.events if e["type"] == "db_fault"}),
        "connections_cut": sum(e["cut"] for e in ev.events if e["type"] == "db_fault"),
        "double_executions": dict(doubled),
        "reruns": dict(sorted(rerun_causes.items())),
        "kill_reruns": sum(n for why, n in rerun_causes.items() if why.endswith("SIGKILL")),
        "rerun_budget": kill_budget(facts)[2],
        **kill_figures(facts),
        "atomic_jobs": atomic_total,
        "atomic_completed": atomic_completed,
        "atomic_counter": ev.counter,
        **workflow_figures(facts),
        **batch_figures(facts),
        "reclaim_max_seconds": {k: round(max(v), 2) for k, v in latencies.items()},
        "reclaim_samples": {k: len(v) for k, v in latencies.items()},
        "handed_back_unstarted": unstarted,
        "handed_back_unstarted_but_ran": unstarted_but_ran,
        "drain_seconds": round(ev.drain_seconds, 1),
        "log_counts": ev.log_counts,
    }


def print_report(
    ev: Evidence, checks: list[Check], say: Callable[[str], None], verbose: bool = False
) -> dict[str, Any]:
    numbers = figures(ev)
    say(
        f"figures: {numbers['jobs']} jobs ({numbers['completed']} completed, {numbers['dead']} "
        f"dead) from {numbers['units']} producer units, {numbers['transactions']} of them "
        f"transactions, {numbers['bursts']} bursts; {numbers['rolled_back_enqueues']} enqueues "
        "rolled back; "
        f"{numbers['deduplicated']} deduplicated; {numbers['executions']} executions in "
        f"{numbers['worker_pids']} worker processes"
    )
    say(
        f"attempt outcomes: {numbers['outcomes']}; handed back as never started: "
        f"{numbers['handed_back_unstarted']}, of which had run: "
        f"{numbers['handed_back_unstarted_but_ran']}"
    )
    say(
        f"re-runs: {numbers['reruns'] or 'none'} (budget for kills {numbers['rerun_budget']}); "
        f"atomic jobs: {numbers['atomic_completed']} of {numbers['atomic_jobs']} completed, "
        f"counter {numbers['atomic_counter']}"
    )
    say(
        f"workflows: {numbers['workflows']} committed, {numbers['workflow_jobs']} jobs, "
        f"{numbers['workflow_jobs_ran']} ran, {numbers['workflow_completed']} completed, "
        f"{numbers['workflow_cancelled']} cancelled after a dependency failed"
    )
    say(
        f"batches: {numbers['batches']} committed ({numbers['batch_jobs']} jobs), "
        f"{numbers['batches_rolled_back']} rolled back; {numbers['batch_callbacks']} callbacks "
        f"stored, {numbers['batch_callbacks_ran']} ran"
    )
    say(
        f"kills: {numbers['kills']} ({numbers['processes_killed']} worker processes, "
        f"concurrency {numbers['concurrency']}), jobs in flight at kills: "
        f"{numbers['jobs_in_flight_at_kills']} (at most {numbers['most_in_flight_at_a_kill']} "
        "in one process)"
    )
    say(f"supervisor logs: {numbers['log_counts']}")
    for check in checks:
        say(f"{'PASS' if check.passed else 'FAIL'} {check.name}: {check.detail}")
        if not check.passed or verbose:
            for example in check.examples:
                say(f"     e.g. {example}")
    failed = sum(1 for c in checks if not c.passed)
    say(
        f"RESULT {ev.vendor}: {'PASS' if not failed else 'FAIL'} "
        f"({len(checks) - failed} of {len(checks)} checks passed)"
    )
    return numbers


ROWS = (
    ("Chaos phase", lambda s: f"{s['seconds']:g} s"),
    ("Jobs committed", lambda s: f"{s['jobs']:,}"),
    ("… completed / dead", lambda s: f"{s['completed']:,} / {s['dead']:,}"),
    ("Enqueues rolled back", lambda s: f"{s['rolled_back_enqueues']:,}"),
    ("Enqueues deduplicated by key", lambda s: f"{s['deduplicated']:,}"),
    ("Handler executions", lambda s: f"{s['executions']:,}"),
    ("Worker SIGKILLs (busy)", lambda s: f"{s['worker_kills']} ({s['worker_kills_busy']})"),
    (
        "Supervisor SIGKILLs / SIGTERMs",
        lambda s: f"{s['supervisor_kills']} / {s['supervisor_sigterms']}",
    ),
    ("Database faults", lambda s: _faults(s)),
    (
        "Attempts lost / handed back",
        lambda s: f"{s['outcomes'].get('lost', 0)} / {s['outcomes'].get('released', 0)}",
    ),
    ("Jobs run more often than recorded", lambda s: _doubles(s)),
    ("Re-runs after kills (budget)", lambda s: _reruns(s)),
    ("Jobs in flight at kills (most in one process)", lambda s: _in_flight(s)),
    ("Atomic jobs completed / counter", lambda s: _atomic(s)),
    ("Workflow jobs completed / cancelled", lambda s: _workflows(s)),
    ("Max reclaim after worker SIGKILL", lambda s: _reclaim(s, "worker SIGKILL")),
    ("Max reclaim after supervisor SIGKILL", lambda s: _reclaim(s, "supervisor SIGKILL")),
    ("Checks passed", lambda s: _verdict(s)),
)


def _faults(summary: dict[str, Any]) -> str:
    faults = summary["db_faults"]
    if "restart" in summary.get("db_fault_modes", []) or summary["connections_cut"] < 0:
        return f"{faults}: server restarted"
    if summary["database"] == "sqlite":
        return f"{faults}: write lock held 3 s"
    return f"{faults}: {summary['connections_cut']} connections cut"


def _doubles(summary: dict[str, Any]) -> str:
    doubled = summary["double_executions"]
    total = sum(doubled.values())
    if not total:
        return "0"
    return f"{total}, all attributed ({', '.join(f'{n} {why}' for why, n in doubled.items())})"


def _reruns(summary: dict[str, Any]) -> str:
    if "kill_reruns" not in summary:
        return "—"  # a summary from before the re-run budget was checked
    return f"{summary['kill_reruns']} ({summary['rerun_budget']})"


def _in_flight(summary: dict[str, Any]) -> str:
    if "jobs_in_flight_at_kills" not in summary:
        return "—"  # a summary from before they were counted
    concurrency = summary.get("concurrency", 1)
    slots = f", --concurrency {concurrency}" if concurrency > 1 else ""
    return f"{summary['jobs_in_flight_at_kills']} ({summary['most_in_flight_at_a_kill']}{slots})"


def _atomic(summary: dict[str, Any]) -> str:
    if summary.get("atomic_counter") is None:
        return "—"
    return f"{summary['atomic_completed']:,} / {summary['atomic_counter']:,}"


def _workflows(summary: dict[str, Any]) -> str:
    if "workflow_jobs" not in summary:
        return "—"  # a summary from before the harness enqueued workflows
    return f"{summary['workflow_completed']:,} / {summary['workflow_cancelled']:,}"


def _reclaim(summary: dict[str, Any], label: str) -> str:
    seconds = summary["reclaim_max_seconds"].get(label)
    samples = summary["reclaim_samples"].get(label, 0)
    return "—" if seconds is None else f"{seconds:.2f} s ({samples} jobs)"


def _verdict(summary: dict[str, Any]) -> str:
    checks = summary["checks"]
    failed = [c["name"] for c in checks if not c["passed"]]
    text = f"{len(checks) - len(failed)} of {len(checks)}"
    return text + (f" — failed: {'; '.join(failed)}" if failed else "")


def markdown_table(summaries: list[dict[str, Any]]) -> str:
    """The figures of several runs side by side, as docs/reliability.md shows them."""
    header = "| | " + " | ".join(s["database"] for s in summaries) + " |"
    lines = [header, "|---" * (len(summaries) + 1) + "|"]
    for label, value in ROWS:
        lines.append(f"| {label} | " + " | ".join(value(s) for s in summaries) + " |")
    return "\n".join(lines)


def save_summary(path: Path, numbers: dict[str, Any], checks: list[Check]) -> None:
    summary = {
        **numbers,
        "checks": [
            {"name": c.name, "passed": c.passed, "detail": c.detail, "examples": c.examples}
            for c in checks
        ],
    }
    path.write_text(json.dumps(summary, indent=1))
