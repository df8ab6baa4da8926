"""A TCP proxy on loopback, for tests that disturb a database connection on the wire: one
thread per connection and direction, each free to hold, drop or pass what it reads
(tests/commit_cutter.py, tests/workers/replication.py)."""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType
from typing import Any


class LoopbackProxy:
    """Listens on 127.0.0.1 (`port`) and connects each client to `upstream`."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self.accept, daemon=True).start()

    def __enter__(self) -> LoopbackProxy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        for sock in [self.listener, *self.sockets]:
            with contextlib.suppress(OSError):
                sock.close()

    def accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection(self.upstream)
            except OSError:
                return
            self.sockets += [client, server]
            state = self.connection_state()
            for run, source, target in (
                (self.to_server, client, server),
                (self.to_client, server, client),
            ):
                threading.Thread(target=run, args=(source, target, state), daemon=True).start()

    def connection_state(self) -> Any:
        """What the two directions of one connection share (nothing, here)."""
        return None

    def to_server(self, client: socket.socket, server: socket.socket, state: Any) -> None:
        self.pump(client, server)

    def to_client(self, server: socket.socket, client: socket.socket, state: Any) -> None:
        self.pump(server, client)

    def pump(self, source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                target.sendall(data)
