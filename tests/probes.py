"""Waiting for what happened in the processes a test started, instead of sleeping.

The package calls `django_sqlqueue.probes.probe(name, **fields)` at the moments tests wait
for; with SQLQUEUE_PROBE_FILE set (the `probes` fixture of tests/workers/conftest.py sets it
for the workers it spawns), each appends one JSON line to that file. `Probes` reads the lines
as they come and waits for one that matches: a name, fields, after a point of the test.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

#: A probe line: {"probe": name, "pid": ..., "at": time.time(), **fields}, and "n", its
#: position in the file (0 for the first line).
Line = dict[str, Any]

#: Seconds a wait allows by default: far beyond any moment a test waits for (milliseconds to
#: a few seconds), so only a real failure reaches it.
TIMEOUT = 60.0


class Probes:
    """The probe lines of one test's file, read incrementally."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lines: list[Line] = []
        self._offset = 0

    def lines(self) -> list[Line]:
        """Every complete line written so far, in the order they were written."""
        try:
            with self.path.open("rb") as file:
                file.seek(self._offset)
                data = file.read()
        except FileNotFoundError:
            return self._lines
        complete = data[: data.rfind(b"\n") + 1]  # a line being written waits for its end
        self._offset += len(complete)
        for raw in complete.splitlines():
            line = json.loads(raw)
            line["n"] = len(self._lines)
            self._lines.append(line)
        return self._lines

    def mark(self) -> int:
        """A point of the test: `after=` it, only lines written from now on count."""
        return len(self.lines())

    def find(
        self,
        name: str,
        *,
        after: int | Line = 0,
        where: Callable[[Line], bool] | None = None,
        **fields: Any,
    ) -> list[Line]:
        """The lines of probe `name` after `after` (a mark, or a line: the lines after it)
        whose fields equal `fields` and for which `where(line)` is true."""
        start = after["n"] + 1 if isinstance(after, dict) else after
        return [
            line
            for line in self.lines()[start:]
            if line["probe"] == name
            and all(line.get(key) == value for key, value in fields.items())
            and (where is None or where(line))
        ]

    def wait(
        self,
        name: str,
        *,
        after: int | Line = 0,
        count: int = 1,
        where: Callable[[Line], bool] | None = None,
        timeout: float = TIMEOUT,
        **fields: Any,
    ) -> Line:
        """Wait until `count` lines match (as `find`); return the `count`-th. On timeout the
        test fails, naming what it waited for and the last lines of that probe."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.find(name, after=after, where=where, **fields)
            if len(found) >= count:
                return found[count - 1]
            if time.monotonic() > deadline:
                seen = [line for line in self.lines() if line["probe"] == name][-5:]
                raise AssertionError(
                    f"probe {name!r} {fields or ''}{' (with a condition)' if where else ''} "
                    f"seen {len(found)} of {count} time(s) after "
                    f"{after['n'] if isinstance(after, dict) else after} within {timeout} s; "
                    f"its last lines: {seen or 'none'} (file {self.path})"
                )
            time.sleep(0.01)
