"""What every management command of the app shares: before `migrate`, or with the database
down, a one-line CommandError that says what to do, never a driver's traceback."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from django.apps import apps
from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError, connections

from ..conf import get_settings

#: Upper bounds of the numeric options: past them a value is a typo, and would overflow a
#: date, a timer or an SQL LIMIT — an error message, not a traceback.
MAX_COUNT = 2**31 - 1
MAX_SECONDS = 365 * 24 * 3600.0
MAX_DAYS = 100 * 365.0


def bounded_int(maximum: int) -> Callable[[str], int]:
    """An argparse type: an integer no larger than `maximum` (lower bounds are the command's
    own checks, with their own messages)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value > maximum:
            raise argparse.ArgumentTypeError(f"{text} is too large (the most is {maximum})")
        return value

    return parse


def bounded_float(maximum: float) -> Callable[[str], float]:
    """An argparse type: a finite number no larger than `maximum`."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"{text} is too large (the most is {maximum:g})")
        return value

    return parse


def missing_tables(alias: str) -> list[str]:
    """The app's tables that database `alias` lacks; DatabaseError if it cannot be reached.

    Every model of the app counts: a project migrated by an older release lacks the newer
    tables, and each command touches some of them."""
    connection = connections[alias]
    with connection.cursor() as cursor:
        tables = set(connection.introspection.table_names(cursor))
    wanted = {model._meta.db_table for model in apps.get_app_config("django_sqlqueue").get_models()}
    return sorted(wanted - tables)


def tables_missing_error(alias: str, missing: list[str]) -> CommandError:
    return CommandError(
        f"The job tables ({', '.join(missing)}) do not exist in database {alias!r}. "
        "Run `manage.py migrate` first."
    )


def require_tables(alias: str) -> None:
    """CommandError unless the job tables exist in `alias` and it answers."""
    try:
        missing = missing_tables(alias)
    except DatabaseError as exc:
        raise CommandError(f"Database {alias!r} cannot be reached: {exc}".strip()) from exc
    if missing:
        raise tables_missing_error(alias, missing)


class ReportingCommand(BaseCommand):
    """A command whose report of what it did is silent at `-v 0`, as Django's own commands
    are: run from cron, a line on stdout becomes a mail. Errors still go to stderr."""

    verbosity = 1

    def execute(self, *args: Any, **options: Any) -> Any:
        self.verbosity = int(options.get("verbosity", 1))
        return super().execute(*args, **options)

    def report(self, text: str) -> None:
        """Say what the command did, unless told to be quiet (`-v 0`)."""
        if self.verbosity > 0:
            self.stdout.write(text)


class QueueCommand(ReportingCommand):
    """A command that reads or writes the job tables: they are looked for first (one
    catalogue query), so that a project that has not run `migrate` is told to."""

    def execute(self, *args: Any, **options: Any) -> Any:
        require_tables(get_settings().database)
        return super().execute(*args, **options)
