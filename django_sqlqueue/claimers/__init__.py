"""One claimer per database vendor behind one small interface (DESIGN.md §4)."""

from __future__ import annotations

from django.db import connections

from .base import Claimer
from .mysql import MySQLClaimer
from .postgresql import PostgreSQLClaimer
from .sqlite import SQLiteClaimer

CLAIMERS: dict[str, type[Claimer]] = {
    "postgresql": PostgreSQLClaimer,
    "mysql": MySQLClaimer,
    "sqlite": SQLiteClaimer,
}


def get_claimer(alias: str) -> Claimer:
    vendor = connections[alias].vendor
    try:
        return CLAIMERS[vendor](alias)
    except KeyError:
        raise NotImplementedError(
            f"django-sqlqueue has no claimer for the {vendor!r} database backend; "
            f"supported: {', '.join(sorted(CLAIMERS))}."
        ) from None


__all__ = ["Claimer", "get_claimer"]
