"""The cluster run's checks: the chaos harness's guarantees, plus what a partition must show.

Pure functions of the chaos Evidence (whose events also hold the cuts: `{"type": "cut",
"host", "hostname", "start", "end", "held": [job ids]}`), tested on made-up evidence.

- Attribution: every execution the queue has no recorded outcome for (a double execution
  when the job ran again) must be explained by a fault the harness caused: its worker was
  SIGKILLed, its host was cut off and the attempt recovered from it, the database restarted
  under it, or it was handed back at shutdown. Anything else is `unattributed`.
- Recovery: every job the cut host held is recovered by another host within the lease bound
  of the cut (or had finished just before the cut).
- Fencing: after its attempt was recovered, a zombie never recorded an outcome for it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..chaos import batches, effects, workflows
from ..chaos import checks as chaos
from ..chaos.checks import reclaim_latencies
from ..chaos.evidence import Evidence, ExecutionRow, timestamp
from ..chaos.facts import RECORDED, Check, Facts, reclaim_bound, unrecorded_executions

KILL, CUT, RESTART, SHUTDOWN = "kill", "cut", "database restart", "shutdown"
#: A job the cut host completed this close to the cut was not really held by it.
CUT_RACE_SECONDS = 1.0


@dataclass(frozen=True)
class Cut:
    host: int
    hostname: str
    start: float
    end: float
    held: tuple[int, ...] = ()
    #: Results the cut host's workers logged as discarded ("its lease was lost").
    fenced: int = 0

    def owns(self, worker_id: str | None) -> bool:
        return bool(worker_id) and str(worker_id).split(":", 1)[0] == self.hostname


def cuts_of(ev: Evidence) -> list[Cut]:
    return [
        Cut(
            e["host"],
            e["hostname"],
            e["start"],
            e["end"],
            tuple(e.get("held", ())),
            e.get("fenced", 0),
        )
        for e in ev.events
        if e["type"] == "cut"
    ]


def reason(f: Facts, cuts: list[Cut], execution: ExecutionRow, entry: dict | None) -> str | None:
    """Which fault explains an unrecorded execution, or None."""
    taken = timestamp(entry.get("finished_at")) if entry else None
    bound = reclaim_bound(f.ev.lease)
    for cut in cuts:
        owned = cut.owns(execution.worker_id)
        if owned and taken is not None and cut.start - 1.0 <= taken <= cut.end + bound:
            return CUT
    if execution.pid in f.killed_pids:
        return KILL
    if entry is None or taken is None:
        return None
    if f.in_fault(execution.started, taken, tail=f.ev.lease):
        return RESTART
    if entry.get("worker") in f.killed_ids:
        return KILL
    if entry.get("outcome") == "released":
        return SHUTDOWN
    return None


def attribute(f: Facts, cuts: list[Cut]) -> tuple[Counter[str], list[str]]:
    reasons: Counter[str] = Counter()
    unattributed = []
    for job, execution, entry in unrecorded_executions(f):
        why = reason(f, cuts, execution, entry)
        if why is None:
            unattributed.append(
                f"job {job.id} {job.kind} attempt {execution.attempt} by {execution.worker_id}: "
                f"no recorded outcome, taken away as {entry.get('outcome') if entry else None}"
            )
        else:
            reasons[why] += 1
    return reasons, unattributed


def check_attributed(f: Facts, cuts: list[Cut]) -> Check:
    reasons, unattributed = attribute(f, cuts)
    parts = ", ".join(f"{n} {why}" for why, n in reasons.most_common()) or "none"
    return Check(
        "every execution without a recorded outcome is explained by a cut, kill or restart",
        not unattributed,
        f"{sum(reasons.values())} attributed ({parts}), {len(unattributed)} unattributed",
        chaos._examples(unattributed),
    )


def cut_recoveries(f: Facts, cuts: list[Cut]) -> tuple[list[float], list[str]]:
    """Seconds from each cut to the recovery of each job the cut host held; and the jobs
    neither recovered nor finished just before the cut."""
    seconds, missing = [], []
    for cut in cuts:
        for job_id in cut.held:
            job = f.jobs_by_id.get(job_id)
            history = job.history if job else []
            lost = [
                timestamp(e.get("finished_at")) or 0.0
                for e in history
                if e.get("outcome") == "lost" and cut.owns(e.get("worker"))
            ]
            finished_before = any(
                e.get("outcome") in RECORDED
                and cut.owns(e.get("worker"))
                and (timestamp(e.get("finished_at")) or 0.0) <= cut.start + CUT_RACE_SECONDS
                for e in history
            )
            handed_back = taken_elsewhere(cut, history)
            if lost:
                seconds.append(min(lost) - cut.start)
            elif handed_back is not None:
                seconds.append(max(0.0, handed_back - cut.start))
            elif not finished_before:
                missing.append(f"job {job_id} held by {cut.hostname} was never recovered")
    return seconds, missing


def taken_elsewhere(cut: Cut, history: list[dict[str, Any]]) -> float | None:
    """When another host started the job, if the cut host gave it back unstarted instead:
    `held` is read just before the cut, and a claimed job the cut host had not started yet
    may go back to the queue in between (a batch behind an overrunning job, a paused queue),
    with no history entry of its own. Then no entry of the cut host starts after the read,
    and another host's attempt does; fencing keeps others from a job the cut host still
    held, so that attempt is where its holding ended."""
    since = cut.start - CUT_RACE_SECONDS

    def began(e: dict[str, Any]) -> float:
        return timestamp(e.get("started_at")) or timestamp(e.get("finished_at")) or 0.0

    if any(cut.owns(e.get("worker")) and began(e) >= since for e in history):
        return None
    elsewhere = [began(e) for e in history if not cut.owns(e.get("worker")) and began(e) >= since]
    return min(elsewhere, default=None)


def check_cut_recovery(f: Facts, cuts: list[Cut]) -> Check:
    seconds, missing = cut_recoveries(f, cuts)
    bound = reclaim_bound(f.ev.lease)
    late = [s for s in seconds if s > bound]
    held = sum(len(cut.held) for cut in cuts)
    return Check(
        "jobs of a cut-off host recovered by the others within the lease bound",
        not missing and not late,
        f"{len(cuts)} cuts, {held} jobs held, {len(seconds)} recovered, max "
        f"{max(seconds, default=0.0):.2f} s (bound {bound:.1f} s)",
        chaos._examples(missing + [f"recovered after {s:.2f} s" for s in late]),
    )


def zombie_results(f: Facts, cuts: list[Cut]) -> tuple[int, int, list[str]]:
    """(attempts a cut host had run or started when they were recovered from it: zombies,
    zombie results the workers' logs show discarded by fencing, attempts whose outcome was
    recorded although they had been recovered: fencing failed)."""
    zombies = sum(
        1
        for _, execution, entry in unrecorded_executions(f)
        if reason(f, cuts, execution, entry) == CUT
    )
    discarded = sum(int(cut.fenced) for cut in cuts)
    overwritten = []
    for job in f.ev.jobs:
        lost = {
            (e.get("worker"), e.get("attempt")) for e in job.history if e.get("outcome") == "lost"
        }
        for entry in job.history:
            key = (entry.get("worker"), entry.get("attempt"))
            if entry.get("outcome") in RECORDED and key in lost:
                overwritten.append(f"job {job.id}: attempt {key[1]} of {key[0]} lost and recorded")
    return zombies, discarded, overwritten


def late_starts(f: Facts, cuts: list[Cut]) -> list[str]:
    """Executions a cut host started after their attempt had been recovered from it: jobs of
    a claimed batch that its worker began once the link was back, although their leases had
    expired meanwhile (allowed by at-least-once, but avoidable: the worker could tell)."""
    late = []
    for job, execution, entry in unrecorded_executions(f):
        taken = timestamp(entry.get("finished_at")) if entry else None
        if reason(f, cuts, execution, entry) == CUT and taken and execution.started > taken:
            late.append(
                f"job {job.id} attempt {execution.attempt} started by {execution.worker_id} "
                f"{execution.started - taken:.1f} s after it was recovered"
            )
    return late


def check_fencing(f: Facts, cuts: list[Cut]) -> Check:
    zombies, discarded, overwritten = zombie_results(f, cuts)
    late = late_starts(f, cuts)
    return Check(
        "zombie results fenced: no outcome recorded for an attempt already recovered",
        not overwritten,
        f"{zombies} attempts recovered from a cut host had run there ({len(late)} of them "
        f"started there only after their recovery), {discarded} zombie results discarded by "
        f"fencing (worker logs), {len(overwritten)} recorded anyway",
        chaos._examples(overwritten) or chaos._examples(late),
    )


def check_plan(f: Facts, cuts: list[Cut], planned: dict[str, Any]) -> Check:
    """A run whose faults did not happen proves nothing."""
    counts = Counter(e["type"] for e in f.ev.events)
    problems = [
        e["type"] for e in f.ev.events if e["type"] in ("producer_failed", "producer_stuck")
    ]
    if planned.get("cut") and not cuts:
        problems.append("no host was cut off")
    if planned.get("cut") and cuts and not any(cut.held for cut in cuts):
        problems.append("the cut host held no job when it was cut")
    if planned.get("restart") and not counts["db_fault"]:
        problems.append("the database was not restarted")
    if planned.get("kills") and not counts["kill_worker"]:
        problems.append("no worker was killed")
    return Check(
        "the harness did what it planned",
        not problems,
        f"{len(cuts)} cuts holding {sum(len(c.held) for c in cuts)} jobs, "
        f"{counts['db_fault']} database restarts, {counts['kill_worker']} worker SIGKILLs",
        chaos._examples(problems),
    )


#: The chaos harness's checks that hold as they are on a cluster run.
SHARED: tuple[Callable[[Facts], Check], ...] = (
    chaos.check_terminal,
    chaos.check_no_job_lost,
    chaos.check_rollbacks_never_ran,
    chaos.check_transactions_atomic,
    chaos.check_none_running,
    chaos.check_attempts,
    chaos.check_history,
    chaos.check_dead,
    effects.check_rerun_budget,
    effects.check_atomic_counter,
    chaos.check_no_concurrent_runs,
    chaos.check_idempotency,
    chaos.check_reclaim,
    chaos.check_producer_errors,
    # Workflows: dependents after dependencies, none left waiting, failures cancel.
    *workflows.CHECKS,
    # Batches: callbacks stored exactly once, after every member, none left unfinished.
    *batches.CHECKS,
)


def run_checks(
    ev: Evidence, planned: dict[str, Any], grace: float, interrupt: float
) -> list[Check]:
    f = Facts(ev)
    cuts = cuts_of(ev)
    return [
        check_plan(f, cuts, planned),
        *(check(f) for check in SHARED),
        check_attributed(f, cuts),
        check_cut_recovery(f, cuts),
        check_fencing(f, cuts),
        chaos.check_shutdowns(f, grace, interrupt),
    ]


def numbers(ev: Evidence) -> dict[str, Any]:
    """The figures the JSON summary needs from one step's evidence."""
    f = Facts(ev)
    cuts = cuts_of(ev)
    expected = {i["token"] for i in f.committed_items() if not i.get("dedup")}
    reasons, unattributed = attribute(f, cuts)
    recoveries, _ = cut_recoveries(f, cuts)
    kills = reclaim_latencies(f)
    zombies, fenced, _ = zombie_results(f, cuts)
    stuck = [j for j in ev.jobs if j.status not in ("completed", "dead", "cancelled")]
    return {
        "jobs": len(ev.jobs),
        "lost": len(expected - set(f.jobs_by_token)),
        "stuck": len(stuck),
        "unrecorded_executions": sum(reasons.values()) + len(unattributed),
        "attributed": dict(reasons),
        "unattributed_duplicates": len(unattributed),
        "cut_recovery_seconds": sorted(round(s, 2) for s in recoveries),
        "max_recovery_seconds": round(
            max([*recoveries, *(s for v in kills.values() for s in v)], default=0.0), 2
        ),
        "zombie_attempts": zombies,
        "zombies_fenced": fenced,
        "zombie_starts_after_recovery": len(late_starts(f, cuts)),
        "cuts": [
            {"host": c.host, "seconds": round(c.end - c.start, 1), "held": len(c.held)}
            for c in cuts
        ],
    }
