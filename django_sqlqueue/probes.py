"""Test-only probes: named moments of the runtime that a test waits for instead of sleeping
(a claimer read the paused queues, a scheduler ticked, the reloader looked, an idle worker
began or stopped waiting).

Off unless the environment names a file (SQLQUEUE_PROBE_FILE, read once at import): then each
moment appends one JSON line to it, from whichever process it happens in, so a test that
spawned workers can wait for what happened in them. Off, a probe costs one truth test. Never
a setting: nothing in a project should depend on it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

#: Where probe lines go (None: probes are off).
PROBE_FILE = os.environ.get("SQLQUEUE_PROBE_FILE") or None
_lock = threading.Lock()


def probe(name: str, **fields: Any) -> None:
    """Record that `name` happened now, with `fields` (JSON values), if probes are on."""
    if PROBE_FILE is None:
        return
    line = json.dumps({"probe": name, "pid": os.getpid(), "at": time.time(), **fields})
    # One short write in append mode: lines from several processes never interleave.
    with _lock, open(PROBE_FILE, "a", encoding="utf-8") as file:
        file.write(line + "\n")
