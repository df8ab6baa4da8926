"""What a run's faults cost in work done twice, checked against the promises that bound it.

- **Re-run budget.** A worker records each job's outcome before it starts the next, so a
  SIGKILLed worker re-runs at most the job it was running (docs/guarantees.md, "At most one
  re-run per crash"). A *re-run* is an execution the queue has no outcome for and after which
  the job ran again; one is the kill's when its process was SIGKILLed after it started and its
  attempt was taken away at or after the kill: the job was *in flight* in that process at the
  kill. Each killed worker process may owe at most one per slot (one, or C with `runworkers
  --concurrency C`), each job at most once, so a run's kill re-runs are at most C times its
  worker SIGKILLs plus, for each supervisor SIGKILL, the workers it had. And a job in flight
  at a kill has its attempt spent (`lost`): one handed back as never started (`released`)
  had started, and the supervisor did not know it.
- **Atomic jobs.** Each `chaos.atomic` job adds one to a counter row in the transaction that
  records its completion: at the end the counter equals the completed atomic jobs, exactly,
  whatever was killed or cut when.

Pure functions of the Evidence, like the other checks.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from .evidence import ExecutionRow, JobRow, timestamp
from .facts import FAULT_TAIL_SECONDS, RECORDED, TAKEN_AWAY, Check, Facts, entry_for, examples
from .mix import ERROR

#: An attempt taken away this long before the harness noted its kill still counts as the
#: kill's (the event is written just after the signal is sent; clocks are the machine's).
KILL_SLACK_SECONDS = 1.0
#: What an atomic job's attempt records when a database fault broke its transaction.
DATABASE_ERRORS = re.compile(
    r"OperationalError|InterfaceError|DatabaseError|could not be committed", re.I
)
ATOMIC = "atomic"
#: Causes of a re-run other than a kill.
LEASE_LOST, HANDED_BACK, UNEXPLAINED = "lease lost", "handed back", "unexplained"


@dataclass(frozen=True)
class Rerun:
    job: JobRow
    execution: ExecutionRow
    #: "worker SIGKILL", "supervisor SIGKILL", or one of the other causes above.
    cause: str
    #: The history entry that took the attempt away (lost, released), if any.
    taken: dict | None = None

    @property
    def by_kill(self) -> bool:
        return self.cause.endswith("SIGKILL")


def transaction_broken_by_fault(f: Facts, job: JobRow, entry: dict) -> bool:
    """An atomic job's attempt that failed with a database error while the harness disturbed
    the database: its transaction rolled back and the job is retried, as designed."""
    if job.kind != ATOMIC or entry.get("outcome") != ERROR:
        return False
    text = f"{entry.get('error', '')} {entry.get('exception', '')}"
    started = timestamp(entry.get("started_at"))
    finished = timestamp(entry.get("finished_at"))
    return (
        bool(DATABASE_ERRORS.search(text))
        and started is not None
        and f.in_fault(started, finished, tail=FAULT_TAIL_SECONDS)
    )


def rerun_cause(f: Facts, execution: ExecutionRow, taken: dict | None) -> str:
    """Why an execution without a recorded outcome ran again."""
    killed = f.killed_pids.get(execution.pid)
    taken_at = timestamp(taken.get("finished_at")) if taken else None
    if killed is not None:
        at, how = killed
        started_before = execution.started <= at + KILL_SLACK_SECONDS
        taken_after = taken_at is None or taken_at >= at - KILL_SLACK_SECONDS
        if started_before and taken_after:
            return f"{how} SIGKILL"
    if taken is None:
        return UNEXPLAINED
    return LEASE_LOST if taken.get("outcome") == "lost" else HANDED_BACK


def reruns(f: Facts) -> list[Rerun]:
    """Every execution that was not its job's last and has no recorded outcome: the work a
    fault made the queue do again. (A recorded failure followed by a retry is not one.)"""
    found = []
    for job in f.ev.jobs:
        ordered = sorted(f.executions.get(job.id, []), key=lambda e: e.started)
        for execution in ordered[:-1]:
            if entry_for(job, execution, RECORDED) is not None:
                continue
            taken = entry_for(job, execution, TAKEN_AWAY)
            found.append(Rerun(job, execution, rerun_cause(f, execution, taken), taken))
    return found


def in_flight_at_kills(f: Facts) -> dict[int, list[ExecutionRow]]:
    """Per killed worker process (pid), the executions in flight in it when it was killed:
    started before the kill, no outcome recorded, the attempt taken away at or after the
    kill — a kill's re-run, or one whose job did not run again (its last attempt). Derived
    from each execution's own start record and the kill times, so as many per process as
    it ran at once."""
    found: dict[int, list[ExecutionRow]] = defaultdict(list)
    for job in f.ev.jobs:
        for execution in f.executions.get(job.id, []):
            if execution.pid not in f.killed_pids or entry_for(job, execution, RECORDED):
                continue
            taken = entry_for(job, execution, TAKEN_AWAY)
            if rerun_cause(f, execution, taken).endswith("SIGKILL"):
                found[execution.pid].append(execution)
    return found


def kill_figures(f: Facts) -> dict[str, int]:
    """Kills (worker and supervisor SIGKILLs), worker processes they killed, jobs in flight
    in those processes at the kill (in all, and the most in one process)."""
    processes = sum(
        len(e["pids"]) for e in f.ev.events if e["type"] in ("kill_worker", "kill_supervisor")
    )
    in_flight = in_flight_at_kills(f)
    return {
        "kills": sum(1 for e in f.ev.events if e["type"] in ("kill_worker", "kill_supervisor")),
        "processes_killed": processes,
        "jobs_in_flight_at_kills": sum(len(runs) for runs in in_flight.values()),
        "most_in_flight_at_a_kill": max((len(runs) for runs in in_flight.values()), default=0),
    }


def kill_budget(f: Facts) -> tuple[int, int, int]:
    """(worker SIGKILLs, supervisor SIGKILLs, re-runs they may cost): one per slot of each
    killed worker process (C with --concurrency C) — the process of a worker SIGKILL, the
    workers of a SIGKILLed supervisor."""
    workers = supervisors = processes = 0
    for event in f.ev.events:
        if event["type"] == "kill_worker":
            workers += 1
            processes += len(event["pids"])
        elif event["type"] == "kill_supervisor":
            supervisors += 1
            processes += len(event["pids"])
    return workers, supervisors, processes * f.ev.concurrency


def rerun_check_name(concurrency: int) -> str:
    if concurrency == 1:
        return "a killed worker re-ran at most the job it was running"
    return (
        f"a killed worker process re-ran only the jobs it had in flight (at most {concurrency}),"
        " each once"
    )


def check_rerun_budget(f: Facts) -> Check:
    found = reruns(f)
    slots = f.ev.concurrency
    causes = Counter(r.cause for r in found)
    by_pid: dict[int, list[Rerun]] = defaultdict(list)
    for rerun in found:
        if rerun.by_kill:
            by_pid[rerun.execution.pid].append(rerun)
    owed = sum(len(runs) for runs in by_pid.values())
    workers, supervisors, budget = kill_budget(f)
    over = {
        pid: runs
        for pid, runs in by_pid.items()
        if len(runs) > slots or len({r.job.id for r in runs}) < len(runs)
    }
    # In flight at the kill, yet handed back as never started: its attempt was not spent.
    unspent = [r for r in found if r.by_kill and (r.taken or {}).get("outcome") == "released"]
    others = ", ".join(
        f"{n} {why}" for why, n in causes.most_common() if not why.endswith("SIGKILL")
    )
    processes = budget // slots
    if slots == 1:
        budget_text = (
            f"{workers} worker SIGKILLs, {processes - workers} workers of {supervisors} "
            "SIGKILLed supervisors); "
            f"{len(over)} killed workers re-ran more than one job"
        )
    else:
        budget_text = (
            f"{slots} for each of {processes} processes: {workers} worker SIGKILLs, "
            f"{processes - workers} workers of {supervisors} SIGKILLed supervisors); "
            f"{len(over)} killed processes re-ran more than {slots} jobs or one twice"
        )
    if unspent:
        budget_text += f"; {len(unspent)} in flight at a kill but handed back unspent"
    return Check(
        rerun_check_name(slots),
        owed <= budget and not over and not unspent,
        f"{owed} re-runs after kills ({causes['worker SIGKILL']} worker, "
        f"{causes['supervisor SIGKILL']} supervisor) for a budget of {budget} ({budget_text}; "
        f"other re-runs: {others or 'none'}",
        examples(
            [
                f"pid {pid} ({runs[0].cause}) re-ran {len(runs)} jobs: "
                + ", ".join(f"{r.job.id} {r.job.kind} attempt {r.execution.attempt}" for r in runs)
                for pid, runs in sorted(over.items())
            ]
            + [
                f"job {r.job.id} {r.job.kind} attempt {r.execution.attempt} ran in pid "
                f"{r.execution.pid} from {r.execution.started:.3f}, killed at "
                f"{f.killed_pids[r.execution.pid][0]:.3f} ({r.cause}), yet was handed back "
                f"unspent: {(r.taken or {}).get('error', '')}"
                for r in unspent
            ]
        ),
    )


def atomic_jobs(f: Facts) -> tuple[int, int]:
    """(atomic jobs, of which completed)."""
    jobs = [job for job in f.ev.jobs if job.kind == ATOMIC]
    return len(jobs), sum(1 for job in jobs if job.status == "completed")


def atomic_executions_killed(f: Facts) -> int:
    """Executions of atomic jobs whose process was SIGKILLed before their body ended: kills
    inside the transaction, whose increment must have rolled back."""
    return sum(
        1
        for job in f.ev.jobs
        if job.kind == ATOMIC
        for e in f.executions.get(job.id, [])
        if e.finished is None and e.pid in f.killed_pids
    )


def check_atomic_counter(f: Facts) -> Check:
    total, completed = atomic_jobs(f)
    counter = f.ev.counter
    executions = sum(len(f.executions.get(j.id, [])) for j in f.ev.jobs if j.kind == ATOMIC)
    if counter is None:
        passed, figure = total == 0, "no counter in the evidence"
    else:
        passed, figure = counter == completed, f"counter {counter}"
    return Check(
        "atomic jobs changed the database exactly once",
        passed,
        f"{figure}, {completed} atomic jobs completed (of {total}, in {executions} executions, "
        f"{atomic_executions_killed(f)} of them SIGKILLed inside their transaction)",
        [] if passed else [f"counter {counter} != {completed} completed atomic jobs"],
    )
