"""The worker's `stopping` event, which its signal handlers can set without deadlocking it.

A Python signal handler runs in the main thread between two bytecodes, so it can run while
that thread is inside `Event.wait()` holding the event's internal lock. `Event.set()` from the
handler then waits for that lock forever: the worker never stops, and the supervisor kills it
only when its grace period runs out. An idle worker on SQLite waits on this event every few
milliseconds, so a SIGTERM lands in that window now and then (a child process waiting in such
a loop, sent SIGTERM at a random moment: 2 of 300 hung). So a handler only raises a flag and
writes a byte to a pipe; a relay thread, which nothing the main thread holds can block, sets
the event and wakes whoever waits on it.
"""

from __future__ import annotations

import contextlib
import os
import threading


class StopEvent(threading.Event):
    """A `threading.Event` with `set_from_signal()`, safe to call from a signal handler."""

    def __init__(self) -> None:
        super().__init__()
        self.signalled = False
        self._relay_pipe: int | None = None

    def relay_signals(self) -> None:
        """Start the relay thread: once, in the process whose handlers will set this event."""
        if self._relay_pipe is not None:
            return
        read, write = os.pipe()
        os.set_blocking(write, False)
        self._relay_pipe = write
        relay = threading.Thread(
            target=self._relay, args=(read,), name="sqlqueue-stop-relay", daemon=True
        )
        relay.start()

    def set_from_signal(self) -> None:
        """From a signal handler: `is_set()` is True at once, waiters wake via the relay."""
        self.signalled = True
        if self._relay_pipe is not None:
            # Full pipe: a byte is already there for the relay, which is all it needs.
            with contextlib.suppress(BlockingIOError):
                os.write(self._relay_pipe, b"\0")

    def _relay(self, read: int) -> None:
        while os.read(read, 64):
            self.set()

    def is_set(self) -> bool:
        return self.signalled or super().is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self.signalled or super().wait(timeout)
