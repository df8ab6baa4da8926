"""The test suite's own PgBouncer: Debian's `pgbouncer` (scripts/install_pgbouncer.sh), started
on a free port of its own, in transaction pooling mode, in front of the PostgreSQL the tests
use. The shared server is never reconfigured: PgBouncer is only a client of it.

PgBouncer refuses to run as root; as root it runs as the `postgres` system user.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

#: Server connections per database and user: few, so that the workers' transactions really
#: do share them (and a state left on one would meet another client).
POOL_SIZE = 4


class PgBouncerUnavailable(RuntimeError):
    """PgBouncer is not installed or would not start; the message says why."""


def executable() -> str:
    found = shutil.which("pgbouncer") or shutil.which("pgbouncer", path="/usr/sbin:/sbin")
    if not found:
        raise PgBouncerUnavailable(
            "pgbouncer is not installed (scripts/install_pgbouncer.sh installs Debian's)"
        )
    return found


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PgBouncer:
    """One PgBouncer process: `start()`, `port`, `stop()`."""

    def __init__(self, server_host: str, server_port: str) -> None:
        # Not under pytest's temporary directories: those are private to root, and PgBouncer
        # may run as another user.
        self.workdir = Path(tempfile.mkdtemp(prefix="sqlqueue-pgbouncer-", dir="/tmp"))
        self.server_host = server_host
        self.server_port = server_port
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.log = self.workdir / "pgbouncer.log"

    def config(self) -> str:
        return "\n".join(
            [
                "[databases]",
                f"* = host={self.server_host} port={self.server_port}",
                "[pgbouncer]",
                "listen_addr = 127.0.0.1",
                f"listen_port = {self.port}",
                "unix_socket_dir =",
                "auth_type = trust",
                f"auth_file = {self.workdir / 'userlist.txt'}",
                "pool_mode = transaction",
                f"default_pool_size = {POOL_SIZE}",
                "max_client_conn = 500",
                "ignore_startup_parameters = extra_float_digits",
                f"logfile = {self.log}",
                f"pidfile = {self.workdir / 'pgbouncer.pid'}",
                "",
            ]
        )

    def start(self, timeout: float = 15) -> None:
        program = executable()
        run_as: dict[str, Any] = {}
        if os.geteuid() == 0:
            user = pwd.getpwnam(os.environ.get("SQLQUEUE_TEST_PGBOUNCER_USER", "postgres"))
            os.chown(self.workdir, user.pw_uid, user.pw_gid)
            run_as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        (self.workdir / "userlist.txt").write_text('"postgres" ""\n')
        for _ in range(3):  # another process may take the free port first
            self.port = free_port()
            ini = self.workdir / "pgbouncer.ini"
            ini.write_text(self.config())
            self.process = subprocess.Popen(
                [program, str(ini)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                **run_as,
            )
            if self._wait_ready(timeout):
                return
            self.stop()
        raise PgBouncerUnavailable(f"pgbouncer did not start; its log says:\n{self.log_text()}")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=1),
            ):
                return True
            time.sleep(0.05)
        return False

    def log_text(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)  # immediate shutdown
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)
