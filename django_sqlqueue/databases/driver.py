"""Statements on the driver's own cursor, for the two statements every job pays for: an
enqueue's INSERT and a job's exit from `running`.

Django's cursor wrapper is a large share of a statement this short: its layers, and on SQLite
a regular expression over the whole statement to turn `%s` into `?` (11 µs of an enqueue's
~90 µs, measured in one process on tmpfs). While something watches the connection's queries
(DEBUG's query log, `assertNumQueries`, an execute wrapper such as a tracing middleware's),
statements go through Django's cursor instead, so that it sees every one of them. Errors come
out as Django's database exceptions either way. A vendor whose driver takes other placeholders
than Django's `%s` says so on its exit writer and inserter (`driver_sql`: SQLite's `?`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper


def watched(connection: BaseDatabaseWrapper) -> bool:
    """Whether something looks at this connection's queries (then they go through Django)."""
    return bool(connection.queries_logged or connection.execute_wrappers)


def run_statement(
    connection: BaseDatabaseWrapper,
    sql: str,
    driver_sql: str,
    params: Sequence[Any],
    *,
    rows: bool,
) -> Any:
    """Run `sql` (its driver form: `driver_sql`) with `params`: its rows if `rows`, else
    its row count."""
    if watched(connection):
        with connection.cursor() as wrapped:
            wrapped.execute(sql, params)
            return wrapped.fetchall() if rows else wrapped.rowcount
    # What Django's cursor() does first: with CONN_HEALTH_CHECKS, a persistent connection the
    # server dropped is replaced here, not found dead by the statement.
    connection.close_if_health_check_failed()
    connection.ensure_connection()
    with connection.wrap_database_errors:
        cursor = connection.connection.cursor()
        try:
            cursor.execute(driver_sql, params)
            return cursor.fetchall() if rows else cursor.rowcount
        finally:
            cursor.close()
