"""What the tests that run their own PostgreSQL servers share (the outage and failover tests):
whether this machine can run one, and `manage.py` against it from a child process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Sequence

from .conftest import ROOT

IN_CI = os.environ.get("CI", "") in ("true", "1")


def why_not(programs: Sequence[str] = ("initdb",)) -> str:
    """'' when this machine can run a private PostgreSQL with these server programs, else why
    not (it needs root: the server runs as the postgres OS user)."""
    if os.geteuid() != 0:
        return "needs root (the private PostgreSQL runs as the postgres OS user)"
    if not shutil.which("runuser"):
        return "needs runuser (util-linux)"
    from benchmarks.cluster import pgserver

    try:
        found = pgserver.bin_dir()
    except RuntimeError as exc:
        return str(exc)
    for program in programs:
        if not (found / program).exists():
            return f"no {program} in {found}"
    try:
        import pwd

        pwd.getpwnam(os.environ.get("CLUSTER_PG_OSUSER", "postgres"))
    except KeyError:
        return "no postgres OS user"
    return ""


def django(env: dict[str, str], *args: str) -> str:
    """`python -m django <args>` in `env`; its output, failing the test on a non-zero exit."""
    result = subprocess.run(
        [sys.executable, "-m", "django", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def server_env(host: str, port: str, database: str, **extra: str) -> dict[str, str]:
    """This process's environment, pointed at `database` on a private server (`host`: its
    socket directory, or a comma-separated list of them, as `port` lists their ports)."""
    env = dict(os.environ)
    env.update(
        DJANGO_SETTINGS_MODULE="tests.settings",
        SQLQUEUE_TEST_DB="postgres",
        SQLQUEUE_TEST_DB_NAME=database,
        PGHOST=host,
        PGPORT=port,
        PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])),
        **extra,
    )
    return env
