"""A logging handler that sends a signal when a given message is logged, so a test can signal
the supervisor at an exact point of its start-up (tests/settings.py installs it when
SQLQUEUE_TEST_SIGNAL_ON is set).

SQLQUEUE_TEST_SIGNAL_ON = "SIGNAL:whom:message prefix": SIGTERM or SIGINT; `self` (the process
that logged the message) or `parent` (its parent: a worker's supervisor). It fires once per
process, for the first record whose message starts with the prefix.
"""

from __future__ import annotations

import logging
import os
import signal


class SignalOnLog(logging.Handler):
    def __init__(self, spec: str) -> None:
        super().__init__()
        name, self.whom, self.prefix = spec.split(":", 2)
        self.signum = signal.Signals[name]
        self.fired_in: int | None = None

    def emit(self, record: logging.LogRecord) -> None:
        if self.fired_in == os.getpid() or not record.getMessage().startswith(self.prefix):
            return
        self.fired_in = os.getpid()
        os.kill(os.getppid() if self.whom == "parent" else os.getpid(), self.signum)
