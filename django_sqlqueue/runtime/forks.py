"""A handler that forks must not leave a second worker behind.

A child forked by a handler is a copy of the worker: if it returns from the handler (or
raises), it would go on to record the job, claim more and run them under the worker's id,
through the parent's database sockets, after the supervisor stopped. The worker process marks
every child forked in it (`os.register_at_fork`); a marked process that comes back into the
worker's code is ended there and then, before it touches anything.

A child also starts without its parent's database connections: two processes speaking
on one socket corrupt each other's conversation with the server (the parent's next query
would hang or fail). The child's first query opens a connection of its own. The parent's
are kept referenced in the child, never closed there: closing would tell the server the
parent's session ended.

A child that runs its own code and exits (`multiprocessing`, a fork that calls `os._exit()`)
never comes back; `subprocess` execs at once and is not affected at all.
"""

from __future__ import annotations

import os
from typing import Any

from django.db import connections

from .connections import forget_transaction

_state = {"installed": False, "forked": False}
#: In a forked child: the parent's connection objects, held so that they are never closed.
_inherited: list[Any] = []


def _mark_child() -> None:
    _state["forked"] = True
    for connection in connections.all(initialized_only=True):
        if connection.connection is not None:
            _inherited.append(connection.connection)
            connection.connection = None
            forget_transaction(connection)


def guard_forks() -> None:
    """Called once in a worker process, before it runs any job."""
    _state["forked"] = False
    if not _state["installed"]:
        os.register_at_fork(after_in_child=_mark_child)
        _state["installed"] = True


def end_if_forked() -> None:
    """In a child a handler forked, returning into the worker: end it at once, without
    cleanup (its sockets and files are its parent's; os._exit closes them for this process
    only)."""
    if _state["forked"]:
        message = (
            f"django-sqlqueue: process {os.getpid()}, forked by a job handler, returned into "
            "the worker; ending it (a forked child must call os._exit() when it is done)\n"
        )
        try:
            os.write(2, message.encode())
        finally:
            os._exit(0)
