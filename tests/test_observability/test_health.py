"""The supervisor's /healthz verdicts, state by state, with a real HTTP server and database."""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.db import connections

from django_sqlqueue.conf import get_settings
from django_sqlqueue.runtime import observing
from django_sqlqueue.runtime.chores import Chores
from django_sqlqueue.runtime.observing import SupervisorTelemetry

pytest.importorskip("prometheus_client")
pytestmark = pytest.mark.django_db(transaction=True)


@dataclass
class Child:
    current_job: Any


@dataclass
class Value:
    value: int = 0


@dataclass
class FakeSupervisor:
    """The supervisor's state as the telemetry reads it (no processes needed)."""

    size: int = 2
    finished_slots: int = 0
    stop_deadline: float | None = None
    children: dict[int, Any] = field(default_factory=dict)
    failure: str | None = None
    chores: Chores = field(default_factory=Chores)


@pytest.fixture
def telemetry():
    from prometheus_client import values

    saved_env = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    saved_class = values.ValueClass
    supervisor = FakeSupervisor(children={1: Child(Value(7)), 2: Child(Value(0))})
    telemetry = SupervisorTelemetry(supervisor, get_settings(), ("127.0.0.1", 0))
    telemetry.start()
    yield supervisor, telemetry
    telemetry.close()
    values.ValueClass = saved_class
    if saved_env is None:
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)
    else:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = saved_env


def healthz(telemetry: SupervisorTelemetry) -> tuple[int, str]:
    host, port = telemetry.server.address
    try:
        with urllib.request.urlopen(f"http://{host}:{port}/healthz", timeout=10) as response:
            return response.status, response.read().decode().strip()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode().strip()


def test_each_verdict(telemetry, monkeypatch):
    supervisor, telemetry = telemetry
    telemetry.tick()
    status, line = healthz(telemetry)
    assert status == 200 and line.startswith("ok: 2 workers")

    # Short of a worker: fine for a while (a restart takes a moment), then not.
    del supervisor.children[2]
    telemetry.tick()
    assert healthz(telemetry)[0] == 200
    telemetry.short_since = time.monotonic() - observing.SHORT_SECONDS - 1
    assert healthz(telemetry) == (503, telemetry.health()[1])
    assert "1 of 2 workers running" in healthz(telemetry)[1]
    supervisor.children[2] = Child(Value(0))
    telemetry.tick()
    assert healthz(telemetry)[0] == 200

    # Recycled workers are not deaths; three deaths in a minute are.
    telemetry.worker_exited(11, 75)
    telemetry.worker_exited(12, 0)
    assert healthz(telemetry)[0] == 200
    for pid in (13, 14, 15):
        telemetry.worker_exited(pid, -9)
    status, line = healthz(telemetry)
    assert status == 503 and line.startswith("3 workers died in the last")
    telemetry.deaths.clear()

    # A stuck main loop.
    telemetry.last_tick = time.monotonic() - observing.STALL_SECONDS - 1
    assert "loop has not run" in healthz(telemetry)[1]
    telemetry.tick()

    # The database stops answering (for real: its address changes to nothing).
    connection = connections[get_settings().database]
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = "/nonexistent/sqlqueue/db.sqlite3"
    else:
        connection.settings_dict["PORT"] = "1"
    try:
        telemetry.db_checked = 0.0
        telemetry.tick()
        status, line = healthz(telemetry)
        assert status == 503 and line.startswith("the database does not answer: "), line
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
    telemetry.db_checked = 0.0
    telemetry.tick()
    assert healthz(telemetry)[0] == 200

    # A chore that raises: unhealthy, saying which and why, until it works again.
    def broken() -> None:
        raise KeyError("next_run_at")

    supervisor.chores.run("scheduler", broken)
    status, line = healthz(telemetry)
    assert status == 503 and line.startswith("the supervisor's scheduler fails for "), line
    assert line.endswith("KeyError: 'next_run_at'"), line
    supervisor.chores.run("scheduler", lambda: None)
    assert healthz(telemetry)[0] == 200

    # Draining.
    supervisor.stop_deadline = time.monotonic() + 30
    assert healthz(telemetry) == (503, "shutting down")

    # The loop itself failed: the supervisor stops its workers and exits.
    supervisor.failure = "RuntimeError: boom"
    assert healthz(telemetry) == (
        503,
        "the supervisor's loop failed (RuntimeError: boom); exiting",
    )
