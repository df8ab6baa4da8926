"""A private PostgreSQL primary with a streaming standby, for the failover test: both are
initdb'd or copied into a temporary directory, run as the `postgres` OS user, and reached by
their own Unix sockets; never the shared server (benchmarks/cluster/pgserver.py starts them).

The standby streams from the primary through a relay on loopback (`Relay`) that the test can
freeze: a standby that stops receiving WAL falls behind as an asynchronous standby over a
slow link does, and what the primary commits meanwhile is lost at a failover, as it would be.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.cluster.pgserver import PrivatePostgres
from tests.loopback_proxy import LoopbackProxy

PRIMARY_PORT = 55442
STANDBY_PORT = 55443
STANDBY_NAME = "standby"


class Relay(LoopbackProxy):
    """The standby's stream, which the test can stop (`freeze`): what the primary commits
    from then on never reaches the standby."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.flowing = threading.Event()
        self.flowing.set()
        super().__init__(upstream)

    def freeze(self) -> None:
        self.flowing.clear()

    def close(self) -> None:
        self.flowing.set()
        super().close()

    def pump(self, source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                self.flowing.wait()
                target.sendall(data)


class Standby(PrivatePostgres):
    """A copy of `primary` made by pg_basebackup, streaming from it through `relay`."""

    def make(self, primary: PrivatePostgres, relay: Relay, port: int) -> None:
        self.prepare_workdir()
        self._run(
            self._as_user(
                str(self.bin / "pg_basebackup"),
                "-D",
                str(self.data),
                "-h",
                str(primary.sockets),
                "-p",
                str(PRIMARY_PORT),
                "-U",
                "postgres",
                "-X",
                "stream",
                "-R",
                "--no-sync",
            )
        )
        with (self.data / "postgresql.conf").open("a") as file:
            # Its own socket and port; promoted, it waits for no standby of its own.
            file.write(
                f"port = {port}\nlisten_addresses = ''\n"
                f"unix_socket_directories = '{self.sockets}'\nsynchronous_standby_names = ''\n"
            )
        with (self.data / "postgresql.auto.conf").open("a") as file:
            file.write(
                f"primary_conninfo = 'host=127.0.0.1 port={relay.port} user=postgres "
                f"application_name={STANDBY_NAME}'\n"
            )

    def promote(self) -> None:
        self.pg_ctl("-w", "-t", "60", "promote")


class ReplicatedPair:
    """The primary, its standby and the relay between them."""

    def __init__(self, root: Path, *, synchronous: bool) -> None:
        self.primary = PrivatePostgres(root / "primary", [], "127.0.0.1")
        self.standby = Standby(root / "standby", [], "127.0.0.1")
        self.synchronous = synchronous
        self.relay: Relay | None = None

    def start(self, database: str) -> None:
        settings: dict[str, Any] = {
            "port": PRIMARY_PORT,
            "listen_addresses": "'127.0.0.1'",  # for the relay; clients use the socket
            "fsync": "off",  # a stopped server, not a lost machine: the files stay
            "wal_level": "replica",
        }
        if self.synchronous:
            settings["synchronous_standby_names"] = f"'{STANDBY_NAME}'"
        self.primary.init(settings)
        with (self.primary.data / "pg_hba.conf").open("a") as file:
            file.write("host replication all 127.0.0.1/32 trust\n")
        self.primary.start()
        self.relay = Relay(("127.0.0.1", PRIMARY_PORT))
        self.standby.make(self.primary, self.relay, STANDBY_PORT)
        self.standby.start()
        self.standby.running = True
        with self.connect(self.primary, "postgres") as admin:
            admin.execute(f"CREATE DATABASE {database}")
            wait_until(lambda: streaming(admin), 30, "the standby never streamed")

    def connect(self, server: PrivatePostgres, database: str) -> Any:
        import psycopg

        port = PRIMARY_PORT if server is self.primary else STANDBY_PORT
        return psycopg.connect(
            host=str(server.sockets), port=port, user="postgres", dbname=database, autocommit=True
        )

    @property
    def hosts(self) -> str:
        return f"{self.primary.sockets},{self.standby.sockets}"

    @property
    def ports(self) -> str:
        return f"{PRIMARY_PORT},{STANDBY_PORT}"

    def cleanup(self) -> None:
        if self.relay is not None:
            self.relay.close()
        for server in (self.primary, self.standby):
            server.cleanup()


def streaming(admin: Any) -> bool:
    rows = admin.execute("SELECT state FROM pg_stat_replication").fetchall()
    return rows == [("streaming",)]


def wait_until(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(what)
        time.sleep(0.05)
