"""The supervisor's HTTP endpoint (`runworkers --metrics-port`): `/metrics` and `/healthz`.

A small threaded HTTP server in the supervisor process. It never touches the database: the
supervisor's main loop reads the queue's state and answers for the database (see
runtime/observing.py), and a request only renders what is already in memory. Forked workers
close the listening socket at once, so the port belongs to the supervisor alone.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

logger = logging.getLogger("django_sqlqueue")

#: Seconds a client may take to send its request.
REQUEST_TIMEOUT = 5.0


class PortUnavailable(Exception):
    """The metrics port cannot be bound (in use, or not allowed)."""


class Endpoints(Protocol):
    """What the server serves; the supervisor's telemetry implements it."""

    def render_metrics(self) -> tuple[bytes, str]: ...

    def health(self) -> tuple[bool, str]: ...


def handler_for(endpoints: Endpoints) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        timeout = REQUEST_TIMEOUT
        server_version = "django-sqlqueue"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            try:
                if path == "/metrics":
                    body, content_type = endpoints.render_metrics()
                    self.reply(200, body, content_type)
                elif path == "/healthz":
                    healthy, reason = endpoints.health()
                    self.reply(200 if healthy else 503, (reason + "\n").encode())
                else:
                    self.reply(404, b"Not found: try /metrics or /healthz\n")
            except Exception as exc:
                logger.exception("Metrics endpoint failed")
                self.reply(500, f"{type(exc).__name__}: {exc}\n".encode())

        def reply(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return  # a scrape every few seconds is not worth a log line

    return Handler


class MetricsServer:
    def __init__(self, host: str, port: int, endpoints: Endpoints) -> None:
        try:
            self.httpd = ThreadingHTTPServer((host, port), handler_for(endpoints))
        except OSError as exc:
            raise PortUnavailable(f"cannot serve metrics on {host}:{port}: {exc}") from exc
        self.httpd.daemon_threads = True
        self.thread: threading.Thread | None = None
        close: Callable[[], None] = self.httpd.socket.close
        # A forked worker must not hold the listening socket (it would keep the port after
        # the supervisor is gone): close it in every child.
        os.register_at_fork(after_in_child=close)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self.thread = threading.Thread(
            target=self.httpd.serve_forever,
            kwargs={"poll_interval": 0.5},
            name="sqlqueue-metrics",
            daemon=True,
        )
        self.thread.start()

    def stop(self) -> None:
        if self.thread is not None:
            self.httpd.shutdown()
            self.thread.join(timeout=5)
        self.httpd.server_close()
