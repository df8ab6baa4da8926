"""One event loop per worker process with slots, for its `async def` handlers.

A slot that runs an `async def` handler schedules its coroutine on the process's loop and
waits for it, so the handlers of all slots run as tasks of one loop (no loop built and torn
down per job), still at most one per slot. And a task, unlike a thread, can be interrupted:
when the attempt's time limit passes, or its cancel's grace, the watch stops it
(`AttemptControl.stop`) and the task is cancelled where it awaits.

A worker without slots runs an `async def` handler with `asyncio.run` in its main thread, as
before: there, SIGALRM interrupts it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Awaitable
from typing import Any

from ..context import AttemptControl
from ..exceptions import JobCancelled, JobTimeout

_installed: ProcessLoop | None = None


class ProcessLoop:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, name="sqlqueue-event-loop", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def start(self) -> None:
        """Run the loop in its thread, and have this process's slots use it."""
        global _installed
        self.thread.start()
        _installed = self

    def close(self) -> None:
        global _installed
        if _installed is self:
            _installed = None
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)

    def run(self, awaitable: Awaitable[Any], control: AttemptControl) -> Any:
        """Run `awaitable` as a task of the loop and wait for it, from a slot's thread. A stop
        of the attempt cancels the task: JobTimeout or JobCancelled then, as a signal would
        raise in a worker's main thread."""
        future = asyncio.run_coroutine_threadsafe(_await(awaitable), self.loop)
        control.on_stop(future.cancel)
        try:
            return future.result()
        except concurrent.futures.CancelledError:
            if control.timed_out.is_set():
                raise JobTimeout() from None
            if control.cancelled.is_set():
                raise JobCancelled(
                    "The job was cancelled and its handler did not stop in time."
                ) from None
            raise
        finally:
            control.on_stop(None)


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def installed() -> ProcessLoop | None:
    """The process's loop, if its worker has slots."""
    return _installed
