"""One measurement, in a fresh process: one worker drains N no-op jobs in-process on a fresh
SQLite file, and prints jobs/s on its last line.

Run by `python -m benchmarks.attempt_cost` as a script (so that nothing of this checkout is
imported before CODE), never by hand: argv is CODE DB_FILE N MODE
WITHOUT, where CODE is the checkout whose `django_sqlqueue` is measured (it goes first on
sys.path), MODE is `batch` or `default` (how successes are recorded) and WITHOUT a
comma-separated list of per-attempt pieces to leave out (see PIECES in cli.py).

In-process and alone, the figure is the CPU cost of the worker's path per job, free of the
multi-process write-lock contention that dominates `benchmarks run`: its spread is ~5 %
where a drain by four processes varies ~10 %. Leaving a piece out patches this process's
copy of the package; it attributes time, it is not a configuration anyone should run.
"""

from __future__ import annotations

import importlib.util
import sys
import time
import types
from pathlib import Path
from typing import Any


def configure(code: str, db_file: str, mode: str) -> None:
    sys.path.insert(0, code)
    # Before anything imports it: a checkout without the package (an empty directory is a
    # namespace package) must be refused, not measured as whatever the path finds next.
    spec = importlib.util.find_spec("django_sqlqueue")
    origin = spec.origin if spec is not None else None
    found = Path(origin).resolve() if origin is not None and Path(origin).is_file() else None
    if found is None or not str(found).startswith(str(Path(code).resolve())):
        raise SystemExit(f"measured {origin}, not the code in {code}")
    import django
    from django.conf import settings

    conf_file = Path(code, "django_sqlqueue", "conf.py")
    package_conf = conf_file.read_text() if conf_file.exists() else ""
    queue: dict[str, Any] = {}
    if mode == "batch" and "batch_completion" in package_conf.lower():
        queue["BATCH_COMPLETION"] = True  # code older than the setting always batched
    settings.configure(
        SECRET_KEY="attempt-cost-only",
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": db_file}},
        INSTALLED_APPS=["django_sqlqueue", "attempt_cost_app"],
        SQLQUEUE=queue,
    )
    django.setup()


def fresh_database(db_file: str, jobs: int) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(db_file + suffix).unlink(missing_ok=True)
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from attempt_cost_app.jobs import noop

    if hasattr(noop, "enqueue_many"):
        noop.enqueue_many([{"i": i} for i in range(jobs)])
    else:
        for i in range(jobs):
            noop.enqueue(i=i)


def worker_for(without: set[str]) -> tuple[Any, bool]:
    """The worker of this checkout (today's runtime/ or the flat layout of before), and
    whether it is today's."""
    try:
        from django_sqlqueue.runtime.worker import JobWorker, WorkerOptions
    except ImportError:
        from django_sqlqueue.worker import JobWorker, WorkerOptions  # type: ignore[no-redef]

        return JobWorker("attempt-cost", WorkerOptions(burst=True)), False
    install_supervisor_watchers(without)
    leave_out_of_package(without)  # before the worker exists: it builds its parts from them
    worker = JobWorker("attempt-cost", WorkerOptions(burst=True))
    leave_out_of_worker(worker, without)
    return worker, True


def install_supervisor_watchers(without: set[str]) -> None:
    """What a supervisor installs before it forks its workers: the dashboard's rollup tally."""
    from django_sqlqueue import outcomes

    try:
        from django_sqlqueue.metrics import rollups
    except ImportError:  # a checkout from before the rollup moved to metrics/
        from django_sqlqueue import rollups  # type: ignore[attr-defined,no-redef]

    outcomes.unwatch_all()
    if "rollup" not in without:
        tally = rollups.RollupTally("default")
        outcomes.watch(tally, tally.flush)


class _NoLeakGuard:
    def before(self) -> None:
        return None

    def after(self) -> str:
        return ""


def leave_out_of_package(without: set[str]) -> None:
    from django_sqlqueue import tracing
    from django_sqlqueue.runtime import attempt

    if "otel" in without:
        tracing.ENABLED = False
    if "leak_guard" in without:
        attempt.LeakGuard = _NoLeakGuard  # type: ignore[assignment,misc]
    if "timer" in without:
        real = attempt.signal
        attempt.signal = types.SimpleNamespace(  # type: ignore[assignment]
            setitimer=lambda *args: None, ITIMER_REAL=real.ITIMER_REAL
        )


def leave_out_of_worker(worker: Any, without: set[str]) -> None:
    if "watch" in without:
        for name in ("begin", "end", "batch_started", "batch_finished"):
            setattr(worker.watch, name, lambda *args, **kwargs: None)
    # The worker keeps one guard for all its attempts: a patch that came too late would
    # measure the full path under the name of a lighter one.
    if "leak_guard" in without and not isinstance(worker.attempts.guard, _NoLeakGuard):
        raise SystemExit("the open-transaction check was not left out")


def drain(worker: Any, today: bool) -> float:
    started = time.perf_counter()
    if today:
        worker.work()
        worker.recorder.flush()
    else:
        worker.run()
    return time.perf_counter() - started


def main(argv: list[str]) -> int:
    code, db_file, jobs_text, mode, without_text = argv
    jobs = int(jobs_text)
    without = set(filter(None, without_text.split(",")))
    configure(code, db_file, mode)
    fresh_database(db_file, jobs)
    worker, today = worker_for(without)
    seconds = drain(worker, today)
    from django_sqlqueue.models import Job

    done = Job.objects.filter(status="completed").count()
    if done != jobs:
        raise SystemExit(f"{done} of {jobs} jobs completed")
    print(f"{jobs / seconds:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
