"""A project made by `startproject`, plus this app, on SQLite with Django's default settings:
web-like transactions that read, then write, beside busy workers, never fail with
`database is locked`.

Django starts a transaction DEFERRED: it reads without the write lock and asks for it at its
first write. Once a worker has committed in between, SQLite cannot let the transaction write
and fails at once, whatever the busy timeout. The app makes such transactions take the write
lock up front (IMMEDIATE), so they wait for it instead. The control case turns that off
(`SQLITE_TRANSACTION_MODE: None`) and must see the failures, which shows the scenario is busy
enough for the test to fail without the app's default.

Everything runs in real processes: `manage.py runworkers -n 4` draining a backlog, and three
"web" processes doing read-then-write transactions in `atomic()`.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from contextlib import closing
from pathlib import Path

import pytest

from tests.runs import sqlite_runs_only

REPO_ROOT = Path(__file__).resolve().parent.parent
WEB_PROCESSES = 3
TRANSACTIONS_PER_PROCESS = 300
BACKLOG = 30_000

pytestmark = [
    pytest.mark.workers,
    pytest.mark.slow,
    pytest.mark.timeout(900),  # its own bounds: up to 180 + 300 + 60 s
    sqlite_runs_only("a SQLite project by design"),
]

JOBS = """
from django_sqlqueue import job


@job("shop.noop")
def noop(n: int = 0) -> None:
    return None
"""

# A view that reads, then writes, in one transaction: what `atomic()` views (and Wagtail's
# publish) do. It also enqueues a job in the same transaction, as a signup view would.
WEB = """
import json
import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mysite.settings")
import django

django.setup()
from django.contrib.auth.models import User
from django.db import OperationalError, transaction

from shop.jobs import noop

index, count = int(sys.argv[1]), int(sys.argv[2])
committed = locked = 0
for i in range(count):
    try:
        with transaction.atomic():
            user = User.objects.get(username=f"web{index}")
            user.first_name = str(i)
            user.save(update_fields=["first_name"])
            noop.enqueue(n=i)
        committed += 1
    except OperationalError as exc:
        if "database is locked" not in str(exc):
            raise
        locked += 1
print(json.dumps({"committed": committed, "locked": locked}))
"""


def project_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SQLQUEUE_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def start_project(root: Path, extra_settings: str) -> Path:
    """`django-admin startproject mysite`, plus django_sqlqueue and an app with one job."""
    root.mkdir()
    subprocess.run(
        [sys.executable, "-m", "django", "startproject", "mysite", str(root)],
        check=True,
        env=project_env(),
    )
    settings = root / "mysite" / "settings.py"
    text = settings.read_text()
    assert "django.db.backends.sqlite3" in text and "OPTIONS" not in text.split("DATABASES")[1]
    settings.write_text(
        text + '\nINSTALLED_APPS += ["django_sqlqueue", "shop"]\n' + extra_settings + "\n"
    )
    (root / "shop").mkdir()
    (root / "shop" / "__init__.py").write_text("")
    (root / "shop" / "jobs.py").write_text(textwrap.dedent(JOBS))
    (root / "web.py").write_text(textwrap.dedent(WEB))
    return root


def manage(root: Path, *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=root,
        env=project_env(),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, f"manage.py {' '.join(args)} failed:\n{result.stderr}"
    return result.stdout


def count(root: Path, where: str) -> int:
    """Rows of the job table matching `where`, read with a plain read-only connection."""
    uri = f"file:{root / 'db.sqlite3'}?mode=ro"
    query = f"SELECT count(*) FROM django_sqlqueue_job WHERE {where}"
    with closing(sqlite3.connect(uri, uri=True, timeout=20)) as connection:
        return int(connection.execute(query).fetchone()[0])


def run_busy_project(root: Path) -> dict[str, object]:
    """Web processes beside draining workers; what each side saw."""
    manage(root, "migrate", "--noinput", "-v0")
    manage(
        root,
        "shell",
        "-c",
        "from django.contrib.auth.models import User\n"
        "from shop.jobs import noop\n"
        f"User.objects.bulk_create([User(username=f'web{{i}}') for i in range({WEB_PROCESSES})])\n"
        f"noop.enqueue_many([{{'n': i}} for i in range({BACKLOG})])",
    )
    supervisor = subprocess.Popen(
        [sys.executable, "manage.py", "runworkers", "-n", "4"],
        cwd=root,
        env=project_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    web: list[subprocess.Popen[str]] = []
    try:
        deadline = time.monotonic() + 60
        while count(root, "status = 'completed'") < 200:  # the workers are busy
            assert supervisor.poll() is None, "runworkers exited early"
            assert time.monotonic() < deadline, "the workers never started"
            time.sleep(0.05)
        web = [
            subprocess.Popen(
                [sys.executable, "web.py", str(index), str(TRANSACTIONS_PER_PROCESS)],
                cwd=root,
                env=project_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for index in range(WEB_PROCESSES)
        ]
        outputs = [process.communicate(timeout=300) for process in web]
        # Still work left when the last web process finished: it ran beside busy workers.
        waiting = count(root, "status IN ('pending', 'running')")
    finally:
        for process in web:
            if process.poll() is None:
                process.kill()
        supervisor.send_signal(signal.SIGTERM)
        worker_log, _ = supervisor.communicate(timeout=60)
    for process, (_, err) in zip(web, outputs, strict=True):
        assert process.returncode == 0, err
    results = [json.loads(out) for out, _ in outputs]
    return {
        "committed": sum(r["committed"] for r in results),
        "locked": sum(r["locked"] for r in results),
        "waiting": waiting,
        "worker_log": worker_log,
    }


def test_web_writes_beside_busy_workers_never_see_database_is_locked(tmp_path: Path) -> None:
    root = start_project(tmp_path / "project", "")
    seen = run_busy_project(root)
    assert seen["waiting"], "the workers drained the backlog before the web processes finished"
    assert (seen["committed"], seen["locked"]) == (WEB_PROCESSES * TRANSACTIONS_PER_PROCESS, 0)
    assert "database is locked" not in str(seen["worker_log"])


def test_with_djangos_default_transactions_the_same_project_fails(tmp_path: Path) -> None:
    """The control: the opt-out gives Django's DEFERRED transactions back, and they fail."""
    root = start_project(tmp_path / "project", 'SQLQUEUE = {"SQLITE_TRANSACTION_MODE": None}')
    seen = run_busy_project(root)
    assert seen["waiting"], "the workers drained the backlog before the web processes finished"
    assert seen["locked"], "no web transaction failed: the scenario is not busy enough to test"
