"""The worker's `stopping` event, set from its signal handlers (runtime/stop_event.py).

A handler runs in the main thread, possibly while that thread is inside `Event.wait()` and
holds the event's lock: a plain `Event.set()` there waits for that lock forever, and the
worker never stops on SIGTERM. These tests run in child processes, so that a regression
fails on a timeout instead of hanging the suite.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from django.db import connection

from django_sqlqueue.runtime.stop_event import StopEvent

MODULE = Path(__file__).resolve().parents[2] / "django_sqlqueue" / "runtime" / "stop_event.py"
#: The child processes load the module alone, not the package: a few ms each.
LOAD = f"""
import importlib.util
spec = importlib.util.spec_from_file_location("stop_event", {str(MODULE)!r})
stop_event = importlib.util.module_from_spec(spec)
spec.loader.exec_module(stop_event)
StopEvent = stop_event.StopEvent
"""


def child_code(code: str) -> str:
    return LOAD + textwrap.dedent(code)


def run_child(code: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", child_code(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_setting_it_from_a_handler_never_waits_for_the_event_lock():
    child = """
        stopping = StopEvent()
        stopping.relay_signals()
        # Where the main thread is, inside Event.wait(), when a handler may interrupt it;
        # Event.set() here would wait for this very lock forever.
        with stopping._cond:
            stopping.set_from_signal()
            print("inside", stopping.is_set(), stopping.wait(0))
        # The relay's set(): the base class's wait() sees only that.
        print("woken", threading.Event.wait(stopping, 5))
    """
    result = run_child("import threading\n" + textwrap.dedent(child), timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["inside", "True", "True", "woken", "True"]


def test_a_thread_waiting_on_it_wakes_when_a_signal_sets_it():
    stopping = StopEvent()
    stopping.relay_signals()
    woke = threading.Event()

    def wait() -> None:
        if stopping.wait(30):
            woke.set()

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    time.sleep(0.05)
    stopping.set_from_signal()
    assert woke.wait(5)


def test_without_a_relay_it_still_reads_as_set():
    stopping = StopEvent()
    stopping.set_from_signal()
    assert stopping.is_set()
    assert stopping.wait(0)


def test_sigterm_at_random_moments_never_hangs_a_process_polling_on_it():
    """A loop waiting on `stopping` again and again, as an idle SQLite worker does every few
    ms, SIGTERMed at a random moment. With zero-length waits the main thread is inside the
    event's lock most of the time: with Event.set() in the handler, 62 of 100 such processes
    hung for good (and about 1 in 100 with the worker's 5 ms waits)."""
    if connection.vendor != "sqlite":
        pytest.skip("does not depend on the database: run in the SQLite runs")
    child = """
        import signal

        stopping = StopEvent()
        stopping.relay_signals()
        signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set_from_signal())
        print("ready", flush=True)
        while not stopping.is_set():
            stopping.wait(0)
    """
    hung = 0
    rounds = 40
    for _ in range(rounds):
        process = subprocess.Popen(
            [sys.executable, "-c", child_code(child)], stdout=subprocess.PIPE
        )
        assert process.stdout is not None
        assert process.stdout.readline().strip() == b"ready"
        time.sleep(random.uniform(0, 0.01))
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            hung += 1
            process.kill()
            process.wait()
        process.stdout.close()
    assert hung == 0, f"{hung} of {rounds} processes did not stop on SIGTERM"
