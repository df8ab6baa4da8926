"""`runworkers --reload`, for development only: a code change restarts the supervisor and its
workers, as `runserver` restarts on a change, so a job added or edited while the workers run
is run by the new code instead of going dead as unknown.

Django's autoreloader watches the files (every imported module, as for runserver, plus each
project app's Python files, so that modules only the workers import count too). Its process
model is not used as is: `runserver` serves from a thread, while the supervisor needs the main
thread for its signals. So:

- the command, started with --reload, only starts itself again as a child process
  (Django's own command line and marker variable) and does so again each time the child exits
  with status 3; it forwards SIGTERM and ignores Ctrl+C, which reaches the child anyway;
- the child runs the supervisor in its main thread and the reloader in another; on a change
  it stops the supervisor as SIGTERM does (running jobs get the grace period), then exits 3;
- a child that fails after a change (a syntax error) is waited out: the next change restarts.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from django.apps import apps
from django.utils import autoreload

from ..probes import probe

logger = logging.getLogger("django_sqlqueue")

#: The child's exit status that asks for a restart (Django's reloader uses the same).
RESTART = 3


def _watch_project_apps(reloader: autoreload.BaseReloader) -> None:
    """Every .py file of the project's own apps (not installed packages): a jobs or tasks
    module that only the worker processes import is not a module of the supervisor."""
    for config in apps.get_app_configs():
        path = Path(config.path)
        if not {"site-packages", "dist-packages"} & set(path.parts):
            reloader.watch_dir(path, "**/*.py")


def _probed_ticks(reloader: autoreload.BaseReloader) -> None:
    """Probe each look of the reloader (its ticker yields once per look at the files): a
    test edits a file only once the reloader has seen it as it was."""
    ticks = reloader.tick

    def tick() -> Iterator[None]:
        for looks, _ in enumerate(ticks(), 1):
            probe("reloader-look", looks=looks)
            yield

    reloader.tick = tick  # type: ignore[method-assign]


def _watch(on_change: Callable[[Path], None]) -> autoreload.BaseReloader:
    """Start Django's reloader in a thread; `on_change(path)` runs once, at the first change."""
    reloader = autoreload.get_reloader()
    _watch_project_apps(reloader)
    _probed_ticks(reloader)
    fired = threading.Event()

    def changed(sender: Any, file_path: Path, **kwargs: Any) -> bool:
        if not fired.is_set():
            fired.set()
            on_change(file_path)
        return True  # handled: Django would otherwise exit the reloader's thread

    autoreload.file_changed.connect(changed, sender=reloader, weak=False)
    thread = threading.Thread(
        target=reloader.run,
        args=(threading.main_thread(),),
        name="sqlqueue-reloader",
        daemon=True,
    )
    thread.start()
    return reloader


def run_child(run: Callable[[], int]) -> int:
    """In the child: the supervisor in the main thread until it stops; RESTART after a
    code change stopped it."""
    changes: list[Path] = []

    def restart(path: Path) -> None:
        changes.append(path)
        logger.info("%s changed: restarting the supervisor and its workers", path)
        os.kill(os.getpid(), signal.SIGTERM)

    reloader = _watch(restart)
    logger.info(
        "Reloading on code changes (development only), watching with %s",
        type(reloader).__name__,
    )
    code = run()
    reloader.stop()
    return RESTART if changes else code


def _wait_for_a_change(stop: threading.Event) -> bool:
    """True at the next code change, False if told to stop first."""
    changed = threading.Event()
    reloader = _watch(lambda path: changed.set())
    while not changed.wait(0.2) and not stop.is_set():
        pass
    reloader.stop()
    return changed.is_set()


def run_parent() -> int:
    """In the command that was given --reload: run it again as a child until it exits for
    another reason than a code change; forward SIGTERM to it."""
    args = autoreload.get_child_arguments()
    env = {**os.environ, autoreload.DJANGO_AUTORELOAD_ENV: "true"}
    child: subprocess.Popen[bytes] | None = None
    stop = threading.Event()

    def forward(signum: int, frame: Any) -> None:
        stop.set()
        if child is not None and child.poll() is None:
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl+C reaches the child by itself
    restarts = 0
    while not stop.is_set():
        child = subprocess.Popen(args, env=env, close_fds=False)
        code = child.wait()
        if code == RESTART:
            restarts += 1
            continue
        if code == 0 or restarts == 0 or stop.is_set():
            return code if code >= 0 else 1
        logger.error(
            "The workers stopped with status %d after a code change; they start again at "
            "the next change (Ctrl+C or SIGTERM to quit)",
            code,
        )
        signal.signal(signal.SIGINT, forward)  # no child now to receive Ctrl+C
        if not _wait_for_a_change(stop):
            return code
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    return 0


def run_with_reload(run: Callable[[], int]) -> int:
    """`run()` (the supervisor) under the reloader; returns the exit status."""
    if os.environ.get(autoreload.DJANGO_AUTORELOAD_ENV) == "true":
        return run_child(run)
    return run_parent()


def reloadable() -> bool:
    """Whether this process can start itself again: it was started as a command line."""
    return "runworkers" in sys.argv[1:]
