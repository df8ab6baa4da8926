"""The run's own PostgreSQL: initdb into a temporary directory, started inside the db
namespace, listening only on the bridge address there and on a socket in that directory.

Never the machine's shared server: restarting this one (`--restart-db`) disturbs nobody, and
its CPU time is the database's share of a run, as the scaling figures need. PostgreSQL refuses
to run as root, so it runs as the `postgres` system user (CLUSTER_PG_OSUSER to change).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from ..procs import CLOCK_TICKS, children

PORT = 55432
DB_USER = "postgres"


def bin_dir() -> Path:
    """PostgreSQL's programs: CLUSTER_PG_BIN, else pg_config's, else the newest Debian one."""
    if os.environ.get("CLUSTER_PG_BIN"):
        return Path(os.environ["CLUSTER_PG_BIN"])
    with contextlib.suppress(OSError, subprocess.CalledProcessError):
        found = subprocess.run(
            ["pg_config", "--bindir"], capture_output=True, text=True, check=True
        ).stdout.strip()
        if (Path(found) / "initdb").exists():
            return Path(found)
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(p.split("/")[-2]))
    if not candidates:
        raise RuntimeError("PostgreSQL's server programs (initdb, pg_ctl) were not found")
    return Path(candidates[-1])


class PrivatePostgres:
    def __init__(self, workdir: Path, netns_prefix: list[str], address: str) -> None:
        self.workdir = workdir
        self.data = workdir / "data"
        self.sockets = workdir / "sockets"
        self.log = workdir / "postgres.log"
        self.netns_prefix = netns_prefix
        self.address = address
        self.bin = bin_dir()
        self.os_user = os.environ.get("CLUSTER_PG_OSUSER", "postgres")
        self.running = False

    def _as_user(self, *command: str) -> list[str]:
        return ["runuser", "-u", self.os_user, "--", *command]

    def _run(self, command: list[str], timeout: float = 120) -> None:
        result = subprocess.run(
            command, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=timeout
        )
        if result.returncode:
            raise RuntimeError(f"{' '.join(command)}: {result.stderr.strip() or result.stdout}")

    def prepare_workdir(self) -> None:
        """The directories and the log file, owned by the user the server runs as."""
        user = pwd.getpwnam(self.os_user)
        for path in (self.workdir, self.sockets):
            path.mkdir(parents=True, exist_ok=True)
            os.chown(path, user.pw_uid, user.pw_gid)
        self.log.touch()
        os.chown(self.log, user.pw_uid, user.pw_gid)

    def init(self, settings: dict[str, Any]) -> None:
        self.prepare_workdir()
        self._run(
            self._as_user(
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                DB_USER,
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            )
        )
        conf = {
            "listen_addresses": f"'{self.address}'",
            "port": PORT,
            "unix_socket_directories": f"'{self.sockets}'",
            **settings,
        }
        with (self.data / "postgresql.conf").open("a") as file:
            file.write("\n# benchmarks.cluster\n")
            file.writelines(f"{key} = {value}\n" for key, value in conf.items())
        subnet = self.address.rsplit(".", 1)[0] + ".0/24"
        with (self.data / "pg_hba.conf").open("a") as file:
            file.write(f"host all all {subnet} trust\n")

    def pg_ctl(self, *args: str) -> None:
        command = self._as_user(str(self.bin / "pg_ctl"), "-D", str(self.data), *args)
        self._run([*self.netns_prefix, *command])

    def start(self) -> None:
        self.pg_ctl("-l", str(self.log), "-w", "-t", "60", "start")
        self.running = True

    def stop(self, mode: str = "fast") -> None:
        if self.running:
            self.pg_ctl("-w", "-t", "60", "-m", mode, "stop")
            self.running = False

    def restart(self) -> float:
        """Stop (fast: every connection is cut) and start again; seconds until it answers."""
        started = time.monotonic()
        self.stop("fast")
        self.start()
        return time.monotonic() - started

    def version(self) -> str:
        return subprocess.run(
            [str(self.bin / "postgres"), "--version"], capture_output=True, text=True
        ).stdout.strip()

    def postmaster_pid(self) -> int | None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            return int((self.data / "postmaster.pid").read_text().split()[0])
        return None

    def cpu_seconds(self) -> float:
        """CPU time of the server so far: the postmaster, its live backends, and the backends
        that ended (their time is in the postmaster's `cutime`/`cstime` once reaped)."""
        pid = self.postmaster_pid()
        if pid is None:
            return 0.0
        total = 0.0
        with contextlib.suppress(OSError):
            fields = _stat_fields(pid)
            total += sum(int(fields[i]) for i in (11, 12, 13, 14)) / CLOCK_TICKS
        for child in children(pid):
            with contextlib.suppress(OSError):
                fields = _stat_fields(child)
                total += (int(fields[11]) + int(fields[12])) / CLOCK_TICKS
        return total

    def django_database(self, name: str, host: str | None = None, port: int = PORT) -> dict:
        """A DATABASES entry: over TCP from a namespace (`host`), else by the socket."""
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": name,
            "USER": DB_USER,
            "HOST": host or str(self.sockets),
            "PORT": str(port),
        }

    def admin(self) -> Any:
        import psycopg

        return psycopg.connect(
            host=str(self.sockets), port=PORT, user=DB_USER, dbname="postgres", autocommit=True
        )

    def cleanup(self) -> None:
        with contextlib.suppress(Exception):
            self.stop("immediate")
        shutil.rmtree(self.workdir, ignore_errors=True)


def _stat_fields(pid: int) -> list[str]:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2 :].split()
