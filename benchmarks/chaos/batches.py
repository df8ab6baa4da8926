"""Batches (docs/workflows.md), checked against what a run left behind.

Producers store a few jobs of the mix in a `with batch(on_complete=...)` block (producer.py,
mix.py: plan_batch), some rolled back on purpose; each record names the batch's id and, in
an entry marked "callback", the token of its callback, a fast job whose handler returns what
`context.batch` said of the batch. The JobBatch rows and each job's batch come back in the
Evidence (`batches`, `JobRow.batch_id`), so the checks can hold the batches to their promises:

- **Stored exactly once.** Each committed batch has its row and exactly its members; once it
  finished, exactly one callback job (by its token), the one its row names; no job is the
  callback of two batches; a rolled-back batch left no row and no job.
- **After every member.** A batch finished, and its callback first started, only after every
  member had finished; the callback saw the batch finished, with its members' ends counted
  as they are.
- **Nothing left.** After the drain, every batch is closed and finished with its callback,
  beyond the supervisors' once-a-second sweep.

Pure functions of the Evidence, like the other checks.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any

from .evidence import JobRow
from .facts import Check, Facts, examples
from .workflows import TERMINAL, WAITING_GRACE_SECONDS, finished_at, first_start

#: The producers' batch units (producer.py: BATCH).
BATCH = "batch"


def rows(f: Facts) -> dict[int, dict[str, Any]]:
    """The batches stored, by id."""
    return {int(row["id"]): row for row in f.ev.batches}


def members(f: Facts) -> dict[int, list[JobRow]]:
    """The jobs stored in each batch, by batch id."""
    found: dict[int, list[JobRow]] = defaultdict(list)
    for job in f.ev.jobs:
        if job.batch_id is not None:
            found[job.batch_id].append(job)
    return found


def callback_token(unit: dict[str, Any]) -> str:
    return next((i["token"] for i in unit["jobs"] if i.get("callback")), "")


def member_tokens(unit: dict[str, Any]) -> set[str]:
    return {i["token"] for i in unit["jobs"] if not i.get("callback")}


def batch_of(f: Facts, unit: dict[str, Any]) -> int | None:
    """The id of a unit's batch: as its producer noted it, else that of a member stored (a
    unit whose commit failed with an error, its reply lost)."""
    if unit.get("batch") is not None:
        return int(unit["batch"])
    ids = {j.batch_id for t in member_tokens(unit) for j in f.jobs_by_token.get(t, [])}
    ids.discard(None)
    return ids.pop() if len(ids) == 1 else None


def committed_batches(f: Facts) -> dict[int, dict[str, Any]]:
    """The committed batch units, by the id of their batch."""
    found = {}
    for unit in f.committed_units:
        batch_id = batch_of(f, unit) if unit["mode"] == BATCH else None
        if batch_id is not None:
            found[batch_id] = unit
    return found


def last_end(jobs: list[JobRow]) -> float | None:
    """When the last of `jobs` finished (None: one has not, or none is there)."""
    ends = [finished_at(job) if job.status in TERMINAL else None for job in jobs]
    return None if not ends or None in ends else max(t for t in ends if t is not None)


def check_callbacks_stored_once(f: Facts) -> Check:
    """Each committed batch: its row, its members, and once finished exactly one callback,
    the one its row names; a rolled-back batch: no row, no job."""
    stored, groups = rows(f), members(f)
    units = [u for u in f.committed_units if u["mode"] == BATCH]
    committed = committed_batches(f)
    wrong: list[str] = []
    callbacks = 0
    for unit in units:
        batch_id = batch_of(f, unit)
        row = stored.get(batch_id) if batch_id is not None else None
        if batch_id is None or row is None:
            wrong.append(f"batch {unit['tx']} committed, but its row #{batch_id} is not there")
            continue
        if committed.get(batch_id) is not unit:
            wrong.append(f"batch {unit['tx']} and another committed batch share row #{batch_id}")
            continue
        where = f"batch #{batch_id} ({unit['tx']})"
        tokens, found = member_tokens(unit), {j.token for j in groups.get(batch_id, [])}
        if found != tokens:
            wrong.append(
                f"{where}: {len(tokens)} members enqueued, {len(found)} stored in it "
                f"({len(tokens - found)} missing, {len(found - tokens)} not its own)"
            )
        token = callback_token(unit)
        rows_of_token = f.jobs_by_token.get(token, []) if token else []
        callbacks += len(rows_of_token)
        named = row["callback_job_id"]
        if row["finished_at"] is None:
            if rows_of_token or named is not None:
                wrong.append(f"{where} is not finished, yet its callback {token} was stored")
        elif len(rows_of_token) != 1:
            wrong.append(f"{where} finished with {len(rows_of_token)} callback jobs ({token})")
        elif named != rows_of_token[0].id:
            wrong.append(
                f"{where} names job {named} as its callback, but its callback {token} is job "
                f"{rows_of_token[0].id}"
            )
        elif rows_of_token[0].batch_id is not None:
            wrong.append(f"{where}: its callback joined batch #{rows_of_token[0].batch_id}")
    twice = Counter(r["callback_job_id"] for r in stored.values() if r["callback_job_id"])
    wrong += [
        f"job {job_id} is the callback of {n} batches" for job_id, n in twice.items() if n > 1
    ]
    rolled_back = [u for u in f.rolled_back_units if u["mode"] == BATCH]
    for unit in rolled_back:
        left = sorted(i["token"] for i in unit["jobs"] if i["token"] in f.jobs_by_token)
        batch_id = unit.get("batch")
        if batch_id is not None and batch_id in stored and batch_id not in committed:
            left.append(f"its row #{batch_id}")
        if left:
            wrong.append(f"batch {unit['tx']} rolled back, but left {', '.join(left)}")
    wrong += [
        f"batch #{batch_id} is stored, but no committed batch accounts for it"
        for batch_id in sorted(set(stored) - set(committed))
        if not any(u.get("batch") == batch_id for u in rolled_back)
    ]
    wrong += [
        f"job {jobs[0].id} ({jobs[0].kind}) is in batch #{batch_id}, which is not stored"
        for batch_id, jobs in sorted(groups.items())
        if batch_id not in stored
    ]
    finished = sum(1 for r in stored.values() if r["finished_at"] is not None)
    return Check(
        "batch callbacks stored exactly once, rolled-back batches left nothing",
        not wrong,
        f"{len(units)} of {len(units) + len(rolled_back)} batches committed, "
        f"{sum(len(member_tokens(u)) for u in units)} members; {finished} finished, "
        f"{callbacks} callback jobs stored; {len(rolled_back)} rolled back; {len(wrong)} wrong",
        examples(wrong),
    )


def seen_wrong(seen: Any, jobs: list[JobRow], batch_id: int) -> str:
    """What a callback saw of its batch (`context.batch`), if it disagrees with its members."""
    if not isinstance(seen, dict):
        return "nothing" if seen is None else repr(seen)
    ends = Counter(job.status for job in jobs)
    actual = {
        "id": batch_id,
        "total": len(jobs),
        "completed": ends["completed"],
        "dead": ends["dead"],
        "cancelled": ends["cancelled"],
        "state": "finished",
    }
    differ = {k: seen.get(k) for k, v in actual.items() if seen.get(k) != v}
    return "" if not differ else f"{differ} (the members: {actual})"


def check_callbacks_after_members(f: Facts) -> Check:
    """A batch finished, and its callback first started, after each member had finished; the
    callback saw its members' ends as they are."""
    groups = members(f)
    wrong: list[str] = []
    margins: list[float] = []
    ran = seen = 0
    for batch_id, row in sorted(rows(f).items()):
        if row["finished_at"] is None:
            continue
        jobs = groups.get(batch_id, [])
        where = f"batch #{batch_id}"
        unfinished = [job for job in jobs if job.status not in TERMINAL]
        if unfinished:
            wrong.append(
                f"{where} finished while its job {unfinished[0].id} is {unfinished[0].status}"
            )
            continue
        end = last_end(jobs) or 0.0
        if row["finished_at"] < end:
            wrong.append(
                f"{where} finished {end - row['finished_at']:.3f} s before its last member"
            )
        callback = f.jobs_by_id.get(row["callback_job_id"] or -1)
        start = first_start(f, callback) if callback else None
        if callback is None or start is None:
            continue  # never stored or never ran: check_none_left_unfinished says so
        ran += 1
        margins.append(start - end)
        if start < max(end, row["finished_at"]):
            wrong.append(
                f"{where}'s callback, job {callback.id}, started {end - start:.3f} s before its "
                "last member finished"
                if start < end
                else f"{where}'s callback, job {callback.id}, started before the batch finished"
            )
        if callback.status == "completed":
            seen += 1
            disagree = seen_wrong(row.get("callback_result"), jobs, batch_id)
            if disagree:
                wrong.append(f"{where}'s callback, job {callback.id}, saw {disagree}")
    closest = f"; closest start {min(margins):.3f} s after the last member's end" if margins else ""
    return Check(
        "batch callbacks ran after every member finished",
        not wrong,
        f"{ran} callbacks ran{closest}; {seen} completed, what each saw of its batch "
        f"(context.batch) compared with its members' ends; {len(wrong)} wrong",
        examples(wrong),
    )


def finish_delays(f: Facts) -> list[float]:
    """For each finished batch: seconds from its last member's end to its finish (a figure)."""
    groups = members(f)
    delays = []
    for batch_id, row in rows(f).items():
        end = last_end(groups.get(batch_id, []))
        if row["finished_at"] is not None and end is not None:
            delays.append(row["finished_at"] - end)
    return delays


def check_none_left_unfinished(f: Facts) -> Check:
    """After the drain, every batch is closed and finished, with its callback stored."""
    groups = members(f)
    end = f.ev.collected or max((e["t"] for e in f.ev.events), default=0.0)
    wrong: list[str] = []
    settling = blocked = 0
    for batch_id, row in sorted(rows(f).items()):
        where = f"batch #{batch_id}"
        jobs = groups.get(batch_id, [])
        if row["closed_at"] is None:
            wrong.append(f"{where} is still open: its block never closed it")
        elif row["finished_at"] is None:
            last = last_end(jobs)
            if last is None and jobs:
                blocked += 1
            elif end - (last or row["closed_at"]) <= WAITING_GRACE_SECONDS:
                settling += 1
            else:
                wrong.append(
                    f"{where} not finished {end - (last or row['closed_at']):.1f} s after its "
                    f"last member finished ({len(jobs)} members)"
                )
        elif row["callback_job_id"] is None:
            wrong.append(f"{where} finished without storing its callback")
        elif row["callback_job_id"] not in f.jobs_by_id:
            wrong.append(f"{where} names job {row['callback_job_id']} as its callback: not there")
    finished = sum(1 for row in f.ev.batches if row["finished_at"] is not None)
    delays = finish_delays(f)
    longest = f" (at most {max(delays):.2f} s after their last member's end)" if delays else ""
    return Check(
        "no batch left unfinished or without its callback after the drain",
        not wrong,
        f"{finished} of {len(f.ev.batches)} batches finished{longest}; of the others, "
        f"{settling} within the sweep's time ({WAITING_GRACE_SECONDS:g} s), {blocked} waiting "
        f"for unfinished members; {len(wrong)} wrong",
        examples(wrong),
    )


def batch_figures(f: Facts) -> dict[str, int]:
    """How many batches a run stored and rolled back, and their callbacks."""
    callbacks = [f.jobs_by_id.get(r["callback_job_id"] or -1) for r in f.ev.batches]
    return {
        "batches": sum(1 for u in f.committed_units if u["mode"] == BATCH),
        "batches_rolled_back": sum(1 for u in f.rolled_back_units if u["mode"] == BATCH),
        "batch_jobs": sum(1 for job in f.ev.jobs if job.batch_id is not None),
        "batch_callbacks": sum(1 for job in callbacks if job is not None),
        "batch_callbacks_ran": sum(1 for job in callbacks if job and f.executions.get(job.id)),
    }


CHECKS = (
    check_callbacks_stored_once,
    check_callbacks_after_members,
    check_none_left_unfinished,
)
