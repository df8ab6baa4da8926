"""A logging handler that sends a signal when a given message is logged, so a test can signal
the supervisor at an exact point of its start-up (tests/settings.py installs it when
SQLQUEUE_TEST_SIGNAL_ON is set).

SQLQUEUE_TEST_SIGNAL_ON = "SIGNAL:whom:message prefix": SIGTERM or SIGINT; `self` (the process
that logged the message) or `parent` (its parent: a worker's supervisor). It fires once per
process, for the first record whose message starts with the prefix. With
SQLQUEUE_TEST_SIGNAL_ONCE naming a file that does not exist yet, it fires once in all: the
process that creates that file signals, the others do not (every worker logs the same start
line, and a supervisor hears a second signal as "stop at once").
"""

from __future__ import annotations

import logging
import os
import signal


class SignalOnLog(logging.Handler):
    def __init__(self, spec: str, once_file: str | None = None) -> None:
        super().__init__()
        name, self.whom, self.prefix = spec.split(":", 2)
        self.signum = signal.Signals[name]
        self.fired_in: int | None = None
        self.once_file = once_file

    def emit(self, record: logging.LogRecord) -> None:
        if self.fired_in == os.getpid() or not record.getMessage().startswith(self.prefix):
            return
        self.fired_in = os.getpid()
        if self.once_file is not None:
            try:
                os.close(os.open(self.once_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return  # another process signalled already
        os.kill(os.getppid() if self.whom == "parent" else os.getpid(), self.signum)
