"""The example project works as the README promises: settings, migrations, and the whole demo.

The example project runs on SQLite whatever SQLQUEUE_TEST_DB says, so it is tested in the
SQLite runs only. Each test drives it as a user would: `manage.py` in a subprocess, with a
scratch database, and `scripts/demo.sh --check` with this interpreter.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sqlite3
import stat
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from types import ModuleType

import pytest

from tests.runs import sqlite_runs_only

REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_DIR = REPO_ROOT / "example_project"

pytestmark = sqlite_runs_only("the example project runs on SQLite only")


def clean_env() -> dict[str, str]:
    """This environment without the example's own settings, and with this checkout importable
    (the venv may not have django-sqlqueue installed)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "EXAMPLE_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def example_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = clean_env()
    env.update(
        EXAMPLE_DB_PATH=str(tmp_path / "db.sqlite3"),
        DJANGO_SECRET_KEY="example-project-tests",
        SHOP_REPORT_STEP_SECONDS="0",
    )
    env.update(extra)
    return env


def manage(tmp_path: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=EXAMPLE_DIR,
        env=example_env(tmp_path, **extra_env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"manage.py {' '.join(args)} failed:\n{result.stderr}"
    return result


def load_settings(monkeypatch: pytest.MonkeyPatch, **env: str) -> ModuleType:
    """Execute the example's settings module afresh, under the given environment."""
    for name in ("DJANGO_DEBUG", "DJANGO_SECRET_KEY", "DJANGO_ALLOWED_HOSTS", "EXAMPLE_DB_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DJANGO_SECRET_KEY", "not-used-here")  # leave .secret_key alone
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    spec = importlib.util.spec_from_file_location(
        "example_settings_under_test", EXAMPLE_DIR / "demo_site" / "settings.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_system_checks_pass_and_migrations_are_complete(tmp_path: Path) -> None:
    manage(tmp_path, "check", "--fail-level", "WARNING")
    manage(tmp_path, "makemigrations", "--check", "--dry-run")


@pytest.mark.parametrize(
    ("environment", "debug"),
    [({}, False), ({"DJANGO_DEBUG": "0"}, False), ({"DJANGO_DEBUG": "1"}, True)],
)
def test_debug_is_off_unless_the_environment_turns_it_on(
    monkeypatch: pytest.MonkeyPatch, environment: dict[str, str], debug: bool
) -> None:
    assert load_settings(monkeypatch, **environment).DEBUG is debug


def test_sqlite_transactions_take_the_write_lock_up_front(monkeypatch: pytest.MonkeyPatch) -> None:
    database = load_settings(monkeypatch).DATABASES["default"]
    assert database["ENGINE"] == "django.db.backends.sqlite3"
    assert database["OPTIONS"]["transaction_mode"] == "IMMEDIATE"


def test_secret_key_is_made_once_private_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings_module = load_settings(monkeypatch)
    key_file = tmp_path / ".secret_key"
    first = settings_module.local_secret_key(key_file)
    second = settings_module.local_secret_key(key_file)
    assert first == second
    assert len(first) >= 50
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [".secret_key"]  # no temporary file left
    assert settings_module.local_secret_key(tmp_path / "other") != first


def test_migrate_in_wal_mode_and_enqueue_each_kind_of_job(tmp_path: Path) -> None:
    manage(tmp_path, "migrate", "--noinput", "-v0")
    # The app put the file in WAL mode by itself (the settings do not ask for it).
    with closing(sqlite3.connect(tmp_path / "db.sqlite3")) as connection:
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    out = manage(tmp_path, "enqueue_demo_jobs", "--emails", "2", "--reports", "1", "--syncs", "3")
    assert "Enqueued 6 jobs." in out.stdout
    by_queue = json.loads(manage(tmp_path, "jobstatus", "--by-queue", "--json").stdout)
    assert {queue: counts["pending"] for queue, counts in by_queue.items()} == {
        "mail": 2,
        "reports": 1,
        "default": 3,
    }


@pytest.mark.slow
@pytest.mark.workers
def test_demo_script_check_serves_the_page_runs_jobs_and_stops_cleanly() -> None:
    """`scripts/demo.sh --check`: web server and two workers, the page's buttons, jobs done."""
    env = clean_env()
    env["SQLQUEUE_DEMO_PYTHON"] = sys.executable
    result = subprocess.run(
        ["bash", str(REPO_ROOT / "scripts" / "demo.sh"), "--check"],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=180,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "demo check: OK" in output
    assert "ok: the batch button enqueued 20 jobs" in output
    assert "ok: logged in to the admin as 'demo'" in output
