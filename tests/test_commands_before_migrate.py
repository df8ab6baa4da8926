"""Every management command of the app, run before `migrate` (and with the database down):
one CommandError line that says what to do, never a driver's traceback.

Before, only runworkers explained; jobstatus and purgejobs ended in a traceback with
`OperationalError: no such table` (SQLite) or `ProgrammingError: relation ... does not exist`.
Each command runs as a user would run it, in a child process, against an empty database of
the vendor under test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connections

import django_sqlqueue
from tests.conftest import REPO_ROOT

COMMANDS_DIR = Path(django_sqlqueue.__file__).parent / "management" / "commands"
#: Arguments that make each command do its usual work; a new command must be added here.
ARGUMENTS = {
    "jobhealth": [],
    "jobstatus": [],
    "jobs": ["list"],
    "movejobs": ["--from", "sqlite_source", "--dry-run"],
    "purgejobs": ["--days", "7"],
    "queues": ["list"],
    "runworkers": ["--burst"],
    "schedules": [],
}
#: Every table of the app, as the message names them (sorted).
TABLES = (
    "django_sqlqueue_flowkey, django_sqlqueue_job, django_sqlqueue_jobbatch, "
    "django_sqlqueue_jobdependency, django_sqlqueue_jobrollup, django_sqlqueue_queuesample, "
    "django_sqlqueue_queuestate, django_sqlqueue_schedule, django_sqlqueue_worker"
)
# Every command in the directory, so that a new one cannot be forgotten.
COMMANDS = sorted(p.stem for p in COMMANDS_DIR.glob("*.py") if not p.stem.startswith("_"))


def test_every_command_is_listed() -> None:
    assert sorted(ARGUMENTS) == COMMANDS


@pytest.fixture
def empty_database(alias: str, vendor: str, tmp_path: Path) -> Iterator[str]:
    """The NAME of a database, on the server under test, with no tables at all."""
    if vendor == "sqlite":
        yield str(tmp_path / "empty.sqlite3")
        return
    connection = connections[alias]
    name = f"{connection.settings_dict['NAME']}_empty"
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {quote(name)}")
        cursor.execute(f"CREATE DATABASE {quote(name)}")
    yield name
    with connection.cursor() as cursor:
        cursor.execute(f"DROP DATABASE IF EXISTS {quote(name)}")


def manage(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    # movejobs moves from a second database; an empty SQLite file stands for it.
    source = {
        "SQLQUEUE_TEST_SQLITE_SOURCE": os.path.join(
            os.environ.get("SQLQUEUE_TEST_TMP", "/tmp"), "never-created-source.sqlite3"
        )
    }
    return subprocess.run(
        [sys.executable, "-m", "django", command, *ARGUMENTS[command]],
        cwd=REPO_ROOT,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", **source, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.django_db(transaction=True)  # CREATE DATABASE cannot run in a transaction
@pytest.mark.parametrize("command", COMMANDS)
def test_before_migrate_the_command_says_run_migrate(empty_database: str, command: str) -> None:
    done = manage(command, {"SQLQUEUE_TEST_DB_NAME": empty_database})
    assert "Traceback" not in done.stderr, done.stderr
    advice = (
        f"The job tables ({TABLES}) do not exist in database 'default'. "
        "Run `manage.py migrate` first."
    )
    if command == "jobhealth":  # a probe: its own exit status, 2 for an unusable database
        assert (done.returncode, done.stderr.strip()) == (2, f"unhealthy: {advice}")
        return
    assert done.returncode == 1, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"CommandError: {advice}"


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "runworkers"])
def test_an_unreachable_database_is_one_line(vendor: str, command: str) -> None:
    """runworkers waits for a database that is down (tests/workers); the others say so."""
    if vendor == "sqlite":
        pytest.skip("SQLite is a file: it is never unreachable")
    done = manage(command, {"PGPORT": "1", "MYSQL_PORT": "1"})
    assert "Traceback" not in done.stderr, done.stderr
    if command == "jobhealth":
        assert done.returncode == 2, done.stderr
        assert done.stderr.startswith("unhealthy: database 'default' does not answer:")
        return
    assert done.returncode == 1, done.stderr
    assert "CommandError: Database 'default' cannot be reached:" in done.stderr
