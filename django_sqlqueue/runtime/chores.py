"""The supervisor's chores (scheduler, maintenance, lease renewal, telemetry) run guarded: an
exception from one is logged and the loop goes on, so a bug or a bad row in one chore never
stops the others, nor the replacing of dead workers.

Each chore handles the errors it expects (a database outage) itself; what reaches the guard is
unexpected. It is logged with its traceback once, not at every turn of the loop, and shown by
/healthz until the chore succeeds again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger("django_sqlqueue")


@dataclass
class Failure:
    reason: str
    since: float  # monotonic


class Chores:
    def __init__(self) -> None:
        #: Chores whose last run raised, by name.
        self.failing: dict[str, Failure] = {}

    def run(self, name: str, chore: Callable[[], object]) -> None:
        try:
            chore()
        except Exception as exc:
            reason = f"{type(exc).__name__}: {exc}"
            failure = self.failing.get(name)
            if failure is None or failure.reason != reason:
                logger.error(
                    "The supervisor's %s failed (it runs again at the next turn): %s",
                    name,
                    reason,
                    exc_info=exc,
                )
                self.failing[name] = Failure(reason, failure.since if failure else time.monotonic())
            return
        if self.failing.pop(name, None) is not None:
            logger.info("The supervisor's %s works again", name)

    def trouble(self) -> str | None:
        """One line on the chores that fail, for /healthz (None: none does)."""
        if not self.failing:
            return None
        now = time.monotonic()
        return "; ".join(
            f"the supervisor's {name} fails for {now - failure.since:.0f} s: {failure.reason}"
            for name, failure in self.failing.items()
        )
