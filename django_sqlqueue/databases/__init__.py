"""One home per database vendor: everything the queue does differently on PostgreSQL, MySQL or
MariaDB, and SQLite lives in that vendor's module (see base.py for what a vendor declares).

    queue_database(alias).claimer()      # the rest of the package never asks for a vendor
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from .base import QueueDatabase
from .mysql import MySQLDatabase
from .postgresql import PostgreSQLDatabase
from .sqlite import SQLiteDatabase

VENDORS: dict[str, type[QueueDatabase]] = {
    database.vendor: database for database in (PostgreSQLDatabase, MySQLDatabase, SQLiteDatabase)
}

_instances: dict[tuple[str, int], QueueDatabase] = {}


class UnsupportedDatabase(NotImplementedError):
    """The queue database is of a vendor django-sqlqueue has no support for."""


def queue_database(alias: str) -> QueueDatabase:
    """The queue on `alias`, one per alias and connection object (threads each have theirs)."""
    connection = connections[alias]
    key = (alias, id(connection))
    database = _instances.get(key)
    if database is None or database.connection is not connection:
        database = _instances[key] = vendor_class(connection.vendor)(alias, connection)
    return database


def vendor_class(vendor: str) -> type[QueueDatabase]:
    try:
        return VENDORS[vendor]
    except KeyError:
        raise UnsupportedDatabase(
            f"django-sqlqueue does not support the {vendor!r} database backend; "
            f"supported: {', '.join(sorted(VENDORS))}."
        ) from None


def tune_new_connection(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """`connection_created` receiver: let the vendor set up each new connection."""
    database = VENDORS.get(connection.vendor)
    if database is not None:
        database.tune_connection(connection)


__all__ = ["VENDORS", "QueueDatabase", "UnsupportedDatabase", "queue_database", "vendor_class"]
