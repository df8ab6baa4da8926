"""A producer process: enqueues the job mix at a steady rate until a deadline.

Run by the harness as `python -m benchmarks.chaos.producer ...`. Each unit of work is logged
as one JSON line once its fate is known: committed, rolled back on purpose, or failed with
an error (then the checks look in the database to see whether it committed).
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

#: How a producer's units of work are split: plain autocommit enqueues, transactions that
#: commit, transactions that roll back, bursts: one `enqueue_many` of BURST_SIZE fast
#: jobs, a backlog for a moment, which workers claim in batches (and a kill then finds a
#: worker holding several jobs), and workflows: a chain or a diamond of jobs that wait for
#: each other (mix.py, plan_workflow), stored in one transaction, WORKFLOW_ROLLBACK of them
#: rolled back on purpose (jobs and dependencies with them), and batches: a few jobs stored in
#: a `with batch(on_complete=...)` block (mix.py, plan_batch), BATCH_ROLLBACK of them rolled
#: back on purpose (the batch and its jobs with them). A batch's record names its callback's
#: token in an entry of its "jobs" marked "callback" (the queue stores that job, once every
#: member has finished), and the batch's id.
AUTOCOMMIT, COMMIT, ROLLBACK, BURST = "autocommit", "commit", "rollback", "burst"
WORKFLOW, BATCH = "workflow", "batch"
UNIT_WEIGHTS = {
    AUTOCOMMIT: 0.48,
    COMMIT: 0.29,
    ROLLBACK: 0.19,
    BURST: 0.04,
    WORKFLOW: 0.06,
    BATCH: 0.05,
}
BURST_SIZE = (40, 80)
WORKFLOW_ROLLBACK = 0.15
BATCH_ROLLBACK = 0.15


class RollBack(Exception):
    """Raised inside a transaction to roll it back on purpose."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--until", type=float, required=True, help="time.time() to stop at")
    parser.add_argument("--rate", type=float, required=True, help="jobs per second")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--run", required=True, help="run id, prefix of tokens and keys")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--misbehave", action="store_true", help="enqueue only misbehaving jobs (misbehave.py)"
    )
    parser.add_argument(
        "--io-share", type=float, default=0.0, help="share of io jobs (runworkers --concurrency)"
    )
    parser.add_argument(
        "--io-seconds",
        type=float,
        nargs=2,
        default=(0.5, 1.5),
        metavar=("MIN", "MAX"),
        help="how long an io job waits",
    )
    return parser.parse_args(argv)


class Producer:
    def __init__(self, args: argparse.Namespace, out: IO[str]) -> None:
        from django.conf import settings

        self.args = args
        self.out = out
        self.rng = random.Random(args.seed * 1000 + args.index)
        self.lease = float(settings.LEASE_SECONDS)
        self.serial = 0
        self.rotation: Any = None
        if args.misbehave:
            from .misbehave import Rotation

            self.rotation = Rotation(self.rng)

    def token(self, prefix: str) -> str:
        self.serial += 1
        return f"{self.args.run}-p{self.args.index}-{prefix}{self.serial}"

    def plan(self) -> list[Any]:
        from .mix import Planned, choose_kind, key_for, params_for

        planned = []
        for _ in range(self.rng.choice([1, 1, 1, 2, 3])):
            kind = choose_kind(self.rng, self.args.io_share)
            key = key_for(time.time(), self.args.run) if kind.keyed else None
            params = params_for(kind, self.rng, self.lease, tuple(self.args.io_seconds))
            planned.append(Planned(kind.name, self.token("j"), params, key))
        return planned

    def plan_misbehaving(self) -> list[Any]:
        """The next misbehaving job of the rotation, alone."""
        from django_sqlqueue.conf import get_settings

        from .misbehave import params_for
        from .mix import Planned

        kind = self.rotation.next()
        params = params_for(kind, self.lease, get_settings().max_result_bytes)
        return [Planned(kind, self.token("m"), params)]

    def enqueue(self, planned: Any) -> dict[str, Any]:
        from django_sqlqueue import registry

        from .misbehave import MISBEHAVING
        from .mix import KINDS

        kind = KINDS.get(planned.kind) or MISBEHAVING[planned.kind]
        handler = registry.get(kind.job_name)
        if planned.key is not None:
            handler = handler.using(idempotency_key=planned.key)
        job = handler.enqueue(token=planned.token, kind=planned.kind, **planned.params)
        return {**asdict(planned), "id": job.pk, "dedup": bool(job.deduplicated)}

    def enqueue_burst(self, planned: list[Any]) -> list[dict[str, Any]]:
        """Fast jobs in one `enqueue_many`: all stored, or none."""
        from django_sqlqueue import registry

        jobs = registry.get("chaos.fast").enqueue_many(
            [{"token": item.token, "kind": item.kind} for item in planned]
        )
        return [
            {**asdict(item), "id": job.pk, "dedup": False}
            for item, job in zip(planned, jobs, strict=True)
        ]

    def enqueue_workflow(self, shape: str, steps: list[Any]) -> list[dict[str, Any]]:
        """A chain through `django_sqlqueue.chain`, a diamond through `.using(after=...)`."""
        import django_sqlqueue
        from django_sqlqueue import registry

        from .mix import CHAIN, KINDS

        def bound(step: Any, after: list[Any]) -> Any:
            options: dict[str, Any] = {"after": after} if after else {}
            if step.run_on_failure:
                options["on_dependency_failure"] = "run"
            return registry.get(KINDS[step.kind].job_name).using(**options)

        def arguments(step: Any) -> dict[str, Any]:
            return {"token": step.token, "kind": step.kind, **step.params}

        if shape == CHAIN:
            prepared = [bound(step, []).prepare(**arguments(step)) for step in steps]
            jobs = django_sqlqueue.chain(*prepared).enqueue()
        else:
            by_token: dict[str, Any] = {}
            jobs = []
            for step in steps:
                after = [by_token[token] for token in step.after]
                by_token[step.token] = bound(step, after).enqueue(**arguments(step))
                jobs.append(by_token[step.token])
        return [
            {**asdict(step), "id": job.pk, "dedup": False}
            for step, job in zip(steps, jobs, strict=True)
        ]

    def enqueue_batch(self, members: list[Any], many: bool) -> list[dict[str, Any]]:
        """A batch's members, inside its block: one by one, or (`many`) the fast ones by one
        `enqueue_many` and the others one by one."""
        bulk = [item for item in members if many and item.kind == "fast"]
        records = self.enqueue_burst(bulk) if bulk else []
        return records + [self.enqueue(item) for item in members if item not in bulk]

    def store_batch(
        self, record: dict[str, Any], members: list[Any], many: bool, rollback: bool
    ) -> None:
        """The batch's block: its row, its members, its callback (the record's entry marked
        "callback") to store once every member has finished; all rolled back by `rollback`."""
        from django_sqlqueue import batch, registry

        from .mix import BATCH_CALLBACK

        [callback] = [item for item in record["jobs"] if item.get("callback")]
        on_complete = registry.get(BATCH_CALLBACK).prepare(
            token=callback["token"], kind=callback["kind"]
        )
        with batch(on_complete=on_complete) as stored:
            record["batch"] = stored.id
            record["jobs"] += self.enqueue_batch(members, many)
            if rollback:
                raise RollBack()

    def unit(self) -> dict[str, Any]:
        """One unit of work; returns its log record."""
        from django.db import transaction

        from .app.models import Order
        from .mix import BATCH_MANY_SHARE, Planned, plan_batch, plan_workflow

        if self.rotation is not None:
            mode, planned = AUTOCOMMIT, self.plan_misbehaving()
        else:
            mode = self.rng.choices(list(UNIT_WEIGHTS), weights=list(UNIT_WEIGHTS.values()))[0]
            planned = self.plan()
        rollback = mode == ROLLBACK
        shape = ""
        many = False
        if mode == AUTOCOMMIT:
            planned = planned[:1]
        elif mode == BURST:
            planned = [
                Planned("fast", self.token("j")) for _ in range(self.rng.randint(*BURST_SIZE))
            ]
        elif mode == WORKFLOW:
            shape, planned = plan_workflow(self.rng, self.lease, lambda: self.token("w"))
            rollback = self.rng.random() < WORKFLOW_ROLLBACK
        elif mode == BATCH:
            planned = plan_batch(self.rng, self.lease, lambda: self.token("b"))
            rollback = self.rng.random() < BATCH_ROLLBACK
            many = self.rng.random() < BATCH_MANY_SHARE
        record: dict[str, Any] = {"tx": self.token("t"), "mode": mode, "jobs": []}
        if shape:
            record["shape"] = shape
        if mode == BATCH:
            record["jobs"].append({**asdict(Planned("fast", self.token("c"))), "callback": True})
        started = time.time()
        try:
            if mode == AUTOCOMMIT:
                record["jobs"].append(self.enqueue(planned[0]))
            elif mode == BURST:
                record["jobs"] += self.enqueue_burst(planned)
            elif mode == WORKFLOW:
                with transaction.atomic():
                    record["jobs"] += self.enqueue_workflow(shape, planned)
                    if rollback:
                        raise RollBack()
            elif mode == BATCH:
                self.store_batch(record, planned, many, rollback)
            else:
                with transaction.atomic():
                    Order.objects.create(tx=record["tx"])
                    for item in planned:
                        record["jobs"].append(self.enqueue(item))
                    # Other work of the request holds the transaction open a moment.
                    time.sleep(self.rng.uniform(0, 0.03))
                    if rollback:
                        raise RollBack()
            record["outcome"] = "committed"
        except RollBack:
            record["outcome"] = "rolled_back"
        except Exception as exc:
            record["outcome"] = "error"
            record["error"] = f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}"
            # Keep what the failed unit meant to enqueue: the checks look for it.
            done = {job["token"] for job in record["jobs"]}
            record["jobs"] += [asdict(p) for p in planned if p.token not in done]
            self.reconnect()
        record["started"] = started
        record["ended"] = time.time()
        return record

    def reconnect(self) -> None:
        from django.db import connection

        try:
            connection.close()
        except Exception:
            connection.connection = None  # a broken socket cannot even be closed cleanly

    def run(self) -> int:
        interval = 1.0 / self.args.rate
        next_at = time.monotonic()
        units = 0
        while time.time() < self.args.until:
            record = self.unit()
            self.out.write(json.dumps(record) + "\n")
            self.out.flush()
            units += 1
            # A burst comes on top of the steady rate, as one unit.
            next_at += interval * (1 if record["mode"] == BURST else max(1, len(record["jobs"])))
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.monotonic()  # fell behind (a fault): do not burst to catch up
        return units


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import django

    django.setup()
    with args.out.open("a") as out:
        Producer(args, out).run()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
