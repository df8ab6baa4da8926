"""Workflows (docs/workflows.md), checked against what a run left behind.

Producers store chains and diamonds of jobs that wait for each other (producer.py, mix.py:
plan_workflow); the JobDependency table's edges come back in the Evidence (`dependencies`).
Each step runs one of the mix's handlers, which record every start and end of a run like any
other job's, so the checks can compare a dependent's runs with its dependencies' ends:

- **After, never before.** A dependent's first start comes after the end of the run that
  completed each dependency (a dependency re-run after a SIGKILL counts by the run that
  completed it, not by the one that was killed).
- **Nothing stranded.** No job is still `waiting` at the end while everything it waits for
  has finished, beyond the supervisors' once-a-second sweep.
- **Failures cancel.** A dependent whose dependency ended dead or cancelled is cancelled as
  abandoned and never ran, unless it was enqueued with on_dependency_failure="run" (then it
  ran); no job is cancelled otherwise (the harness cancels nothing by hand).
- **Ran once released.** Each completed step ran its handler (a run matches its completing
  attempt); a dependent was claimed and ran only once every job it waits for had finished,
  however it ended.
- **Stored as enqueued.** The edges in the database are exactly those of the committed
  workflows (a rolled-back workflow leaves neither jobs nor edges).

Pure functions of the Evidence, like the other checks.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django_sqlqueue.states import ABANDONED_OWNER

from .evidence import ExecutionRow, JobRow, timestamp
from .facts import RECLAIM_SLACK_SECONDS, Check, Facts, entry_for, examples
from .mix import COMPLETED

TERMINAL = ("completed", "dead", "cancelled")
FAILED = ("dead", "cancelled")
#: Supervisors sweep waiting jobs with nothing left to wait for once a second (plus slack):
#: a job may still be waiting this long after its last dependency finished.
WAITING_GRACE_SECONDS = 1.0 + RECLAIM_SLACK_SECONDS

Links = dict[int, list[tuple[int, bool]]]


def links(f: Facts) -> Links:
    """For each job that waits for others: (the job it waits for, run_on_failure) each."""
    waits: Links = defaultdict(list)
    for job_id, depends_on, run_on_failure in f.ev.dependencies:
        waits[int(job_id)].append((int(depends_on), bool(run_on_failure)))
    return waits


def workflow_job_ids(waits: Links) -> set[int]:
    return set(waits) | {depends_on for edges in waits.values() for depends_on, _ in edges}


def completion_run(f: Facts, job: JobRow) -> ExecutionRow | None:
    """The run of the handler that completed `job` (its worker and attempt), if any."""
    for execution in f.executions.get(job.id, []):
        if entry_for(job, execution, (COMPLETED,)) is not None:
            return execution
    return None


def completed_at(f: Facts, job: JobRow) -> float | None:
    """When the run that completed `job` ended: its own record of its end, else the time the
    queue recorded the completion (the end was not written: a database fault)."""
    run = completion_run(f, job)
    if run is None:
        return None
    if run.finished is not None:
        return run.finished
    entry = entry_for(job, run, (COMPLETED,)) or {}
    return timestamp(entry.get("finished_at"))


def finished_at(job: JobRow) -> float | None:
    """When the queue recorded `job`'s terminal state."""
    if job.finished_at is not None:
        return job.finished_at
    ends = [timestamp(entry.get("finished_at")) for entry in job.history]
    return max((t for t in ends if t is not None), default=None)


def first_start(f: Facts, job: JobRow) -> float | None:
    """The earliest of its handler's starts and of its claims (history), if it ever ran."""
    starts = [e.started for e in f.executions.get(job.id, [])]
    starts += [t for e in job.history if (t := timestamp(e.get("started_at"))) is not None]
    return min(starts, default=None)


def ran(f: Facts, job: JobRow) -> bool:
    return bool(f.executions.get(job.id) or job.history)


def abandoned(job: JobRow) -> bool:
    return job.status == "cancelled" and job.lease_owner == ABANDONED_OWNER


def check_dependents_after_dependencies(f: Facts) -> Check:
    """(a) Each dependent's first start came after each dependency's completing run ended."""
    waits = links(f)
    early: list[str] = []
    margins: list[float] = []
    rerun = 0
    for job_id, edges in sorted(waits.items()):
        job = f.jobs_by_id.get(job_id)
        start = first_start(f, job) if job else None
        if job is None or start is None:
            continue
        for depends_on, _ in edges:
            dependency = f.jobs_by_id.get(depends_on)
            if dependency is None or dependency.status != COMPLETED:
                continue
            end = completed_at(f, dependency)
            run = completion_run(f, dependency)
            if end is None or run is None:
                continue  # no run to compare with: check_steps_ran_once_released says so
            rerun += len(f.executions.get(depends_on, [])) > 1
            margins.append(start - end)
            if start < end:
                early.append(
                    f"job {job_id} ({job.kind}) started {end - start:.3f} s before job "
                    f"{depends_on} ({dependency.kind}), which it waits for, completed (its "
                    f"attempt {run.attempt} in pid {run.pid} ended then)"
                )
    closest = f"; closest start {min(margins):.3f} s after the end" if margins else ""
    return Check(
        "workflow dependents started after their dependencies completed",
        not early,
        f"{len(margins)} completed dependencies of dependents that ran ({rerun} of them run "
        f"more than once, each counted by the run that completed it), {len(early)} dependents "
        f"started before{closest}",
        examples(early),
    )


def check_none_left_waiting(f: Facts) -> Check:
    """(b) No job still waiting at the end with nothing left to wait for."""
    waits = links(f)
    end = f.ev.collected or max((e["t"] for e in f.ev.events), default=0.0)
    stranded: list[str] = []
    settling = blocked = 0
    waiting = [job for job in f.ev.jobs if job.status == "waiting"]
    for job in waiting:
        dependencies = [f.jobs_by_id.get(d) for d, _ in waits.get(job.id, [])]
        unfinished = [d for d in dependencies if d is not None and d.status not in TERMINAL]
        if unfinished:
            blocked += 1
            continue
        last = max((finished_at(d) or 0.0 for d in dependencies if d is not None), default=0.0)
        if end - last <= WAITING_GRACE_SECONDS:
            settling += 1
            continue
        ended = ", ".join(f"#{d.id} {d.status}" for d in dependencies if d is not None)
        stranded.append(
            f"job {job.id} ({job.kind}) still waiting {end - last:.1f} s after the last job it "
            f"waits for finished ({ended or 'none left'})"
        )
    delays = release_delays(f, waits)
    longest = (
        f", longest from the last dependency's end to the first claim {max(delays):.2f} s"
        if delays
        else ""
    )
    return Check(
        "no workflow job left waiting once its dependencies finished",
        not stranded,
        f"{len(delays)} dependents released and claimed{longest}; "
        f"{len(waiting)} still waiting: {len(stranded)} with nothing left to wait for "
        f"(longer than {WAITING_GRACE_SECONDS:g} s), {settling} within the sweep's time, "
        f"{blocked} waiting for unfinished jobs",
        examples(stranded),
    )


def release_delays(f: Facts, waits: Links) -> list[float]:
    """For each dependent claimed: seconds from its last dependency's end to its first claim
    (a queue wait as much as the release, so a figure, not a bound)."""
    delays = []
    for job_id, edges in waits.items():
        job = f.jobs_by_id.get(job_id)
        claimed = timestamp(job.history[0].get("started_at")) if job and job.history else None
        ends = [finished_at(f.jobs_by_id[d]) for d, _ in edges if d in f.jobs_by_id]
        if claimed is not None and ends and None not in ends:
            delays.append(claimed - max(t for t in ends if t is not None))
    return delays


def check_failed_dependencies_cancel(f: Facts) -> Check:
    """(c) A dependent whose dependency ended dead or cancelled is cancelled and never ran,
    unless enqueued with on_dependency_failure="run"; no other job is cancelled."""
    waits = links(f)
    wrong: list[str] = []
    cancelled = ran_anyway = 0
    for job_id, edges in sorted(waits.items()):
        job = f.jobs_by_id.get(job_id)
        if job is None:
            continue
        status = {d: f.jobs_by_id[d].status for d, _ in edges if d in f.jobs_by_id}
        failed = [d for d, _ in edges if status.get(d) in FAILED]
        blocking = [d for d, run_on_failure in edges if not run_on_failure and d in failed]
        what = f"job {job_id} ({job.kind}) is {job.status}{' and ran' if ran(f, job) else ''}"
        if blocking:
            cause = f"job {blocking[0]}, which it waits for, ended {status[blocking[0]]}"
            if abandoned(job) and not ran(f, job):
                cancelled += 1
            else:
                wrong.append(f"{what}, but {cause}: it should be cancelled, never run")
        elif failed and all(s in TERMINAL for s in status.values()):
            cause = f"job {failed[0]} ended {status[failed[0]]}"
            if ran(f, job) and not abandoned(job):
                ran_anyway += 1
            else:
                wrong.append(f"{what}; enqueued to run on failure, it should have run ({cause})")
        elif abandoned(job):
            wrong.append(f"{what} as abandoned, but none of the jobs it waits for failed")
    for job in f.ev.jobs:
        if job.status == "cancelled" and not (abandoned(job) and job.id in waits):
            wrong.append(f"job {job.id} ({job.kind}) is cancelled, and the harness cancels none")
    return Check(
        "dependents of failed jobs were cancelled and never ran (unless run on failure)",
        not wrong,
        f"{cancelled} dependents cancelled after a dependency failed, {ran_anyway} ran anyway "
        f'(on_dependency_failure="run"); {len(wrong)} wrong',
        examples(wrong),
    )


def check_steps_ran_once_released(f: Facts) -> Check:
    """(d) Each completed step ran its handler; each dependent was claimed and ran only once
    every job it waits for had finished (released once, never early)."""
    waits = links(f)
    wrong: list[str] = []
    completed = released = 0
    for job_id in sorted(workflow_job_ids(waits)):
        job = f.jobs_by_id.get(job_id)
        if job is None or job.status != COMPLETED:
            continue
        completed += 1
        if not f.executions.get(job_id):
            wrong.append(f"job {job_id} ({job.kind}) completed, but its handler never ran")
        elif completion_run(f, job) is None:
            wrong.append(
                f"job {job_id} ({job.kind}) completed, but no run of its handler was the "
                "completing attempt"
            )
    for job_id, edges in sorted(waits.items()):
        job = f.jobs_by_id.get(job_id)
        start = first_start(f, job) if job else None
        if job is None or start is None:
            continue
        released += 1
        for depends_on, _ in edges:
            dependency = f.jobs_by_id.get(depends_on)
            if dependency is None:
                continue
            end = finished_at(dependency)
            if dependency.status not in TERMINAL or end is None:
                wrong.append(
                    f"job {job_id} ({job.kind}) ran while job {depends_on}, which it waits "
                    f"for, is {dependency.status}"
                )
            elif start < end:
                wrong.append(
                    f"job {job_id} ({job.kind}) was claimed or ran {end - start:.3f} s before "
                    f"job {depends_on}, which it waits for, ended {dependency.status}"
                )
    return Check(
        "workflow steps ran once released: completed steps ran, no dependent ran early",
        not wrong,
        f"{len(workflow_job_ids(waits))} workflow jobs, {completed} completed; {released} "
        f"dependents claimed, each only once all it waits for had finished; {len(wrong)} wrong",
        examples(wrong),
    )


def planned_edges(items: list[dict[str, Any]]) -> dict[str, set[tuple[str, bool]]]:
    return {
        item["token"]: {(token, bool(item.get("run_on_failure"))) for token in item["after"]}
        for item in items
        if "after" in item
    }


def check_workflows_stored(f: Facts) -> Check:
    """The edges in the database are those of the committed workflows, no more, no fewer."""
    committed = [unit for unit in f.committed_units if unit["mode"] == "workflow"]
    planned = planned_edges([item for unit in committed for item in unit["jobs"]])
    token_of = {job.id: job.token for job in f.ev.jobs}
    stored: dict[str, set[tuple[str, bool]]] = defaultdict(set)
    for job_id, depends_on, run_on_failure in f.ev.dependencies:
        key = token_of.get(int(job_id), f"#{job_id}")
        stored[key].add((token_of.get(int(depends_on), f"#{depends_on}"), bool(run_on_failure)))
    wrong = [
        f"{token}: enqueued after {sorted(edges)}, stored after {sorted(stored.get(token, []))}"
        for token, edges in sorted(planned.items())
        if stored.get(token, set()) != edges
    ]
    wrong += [
        f"{token}: stored after {sorted(edges)}, which no committed workflow accounts for"
        for token, edges in sorted(stored.items())
        if token not in planned
    ]
    workflows = sum(1 for unit in f.ev.units if unit["mode"] == "workflow")
    return Check(
        "workflow dependencies stored as enqueued",
        not wrong,
        f"{len(committed)} of {workflows} workflows committed, {len(planned)} jobs, "
        f"{len(f.ev.dependencies)} dependencies stored; {len(wrong)} jobs disagree",
        examples(wrong),
    )


def workflow_figures(f: Facts) -> dict[str, int]:
    """How many workflows and workflow jobs a run had, and how they ended."""
    waits = links(f)
    ids = workflow_job_ids(waits)
    jobs = [f.jobs_by_id[i] for i in ids if i in f.jobs_by_id]
    return {
        "workflows": sum(1 for u in f.committed_units if u["mode"] == "workflow"),
        "workflow_jobs": len(jobs),
        "workflow_jobs_ran": sum(1 for job in jobs if f.executions.get(job.id)),
        "workflow_completed": sum(1 for job in jobs if job.status == COMPLETED),
        "workflow_cancelled": sum(1 for job in jobs if abandoned(job)),
    }


CHECKS = (
    check_workflows_stored,
    check_dependents_after_dependencies,
    check_none_left_waiting,
    check_failed_dependencies_cancel,
    check_steps_ran_once_released,
)
