"""A TCP proxy on loopback that makes a commit's outcome unknown to its caller: once armed, it
passes the next COMMIT to the database server, lets the server commit, and drops the client's
connection instead of passing the reply back. The caller gets a connection error for a
transaction that committed: a commit in doubt, as a failover or a network cut can leave one.

Plain bytes: it needs no TLS (the test servers run without it, and the clients are told not to
ask for it) and it sees PostgreSQL's and MySQL's text protocols alike, where COMMIT travels as
the query text.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading

from tests.loopback_proxy import LoopbackProxy

#: COMMIT as a statement: not the COMMIT in `SET autocommit=0`, which MySQL's clients send.
COMMIT = re.compile(rb"(?<![A-Z_])COMMIT\b")


class CommitCutter(LoopbackProxy):
    def __init__(self, upstream: tuple[str, int]) -> None:
        self.armed = threading.Event()
        #: Set once a commit was passed on and its reply withheld.
        self.cut = threading.Event()
        super().__init__(upstream)

    def connection_state(self) -> threading.Event:
        """Set once this connection sent the armed COMMIT."""
        return threading.Event()

    def to_server(
        self, client: socket.socket, server: socket.socket, committing: threading.Event
    ) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                if self.armed.is_set() and COMMIT.search(data.upper()):
                    self.armed.clear()
                    committing.set()
                server.sendall(data)

    def to_client(
        self, server: socket.socket, client: socket.socket, committing: threading.Event
    ) -> None:
        with contextlib.suppress(OSError):
            while data := server.recv(65536):
                if committing.is_set():
                    # The server answered the COMMIT: it committed. The client never hears.
                    client.shutdown(socket.SHUT_RDWR)
                    client.close()
                    server.close()
                    self.cut.set()
                    return
                client.sendall(data)
