"""Fast history: INSERT … SELECT over a generated series, one statement per 100,000 rows."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

CHUNK = 100_000

UUID_SQL = {
    "sqlite": "lower(hex(randomblob(16)))",
    "postgresql": "gen_random_uuid()",
    "mysql": "UUID()",
}


def _series(vendor: str, count: int) -> str:
    """A FROM clause yielding `count` rows."""
    if vendor == "postgresql":
        return f"generate_series(1, {count})"
    if vendor == "sqlite":
        return (
            f"(WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n "
            f"WHERE x < {count}) SELECT x FROM n)"
        )
    digits = "(SELECT 0 d UNION ALL " + " UNION ALL ".join(f"SELECT {i}" for i in range(1, 10))
    joined = ", ".join(f"{digits}) t{i}" for i in range(6))
    return f"(SELECT 1 x FROM {joined} LIMIT {count}) series"


def seed_rows(connection: Any, table: str, columns: dict[str, str], count: int) -> None:
    """Insert `count` rows of `columns` (SQL expressions; {now} and {uuid} are filled in)."""
    vendor = connection.vendor
    # Finished yesterday: history a busy week leaves, inside any pruning window (django-sqlqueue
    # prunes completed jobs after 7 days by default, and would delete older seed rows mid-run).
    yesterday = datetime.now(timezone.utc) - timedelta(days=1)
    when = yesterday.strftime("'%Y-%m-%d %H:%M:%S'")
    names = ", ".join(connection.ops.quote_name(name) for name in columns)
    values = ", ".join(expr.format(now=when, uuid=UUID_SQL[vendor]) for expr in columns.values())
    done = 0
    while done < count:
        size = min(CHUNK, count - done)
        with connection.cursor() as cursor:
            cursor.execute(
                f"INSERT INTO {connection.ops.quote_name(table)} ({names}) "
                f"SELECT {values} FROM {_series(vendor, size)}"
            )
        done += size
    settle(connection, table)


def settle(connection: Any, table: str) -> None:
    """Bring the freshly seeded table to the state a week of history leaves: on disk, analysed.

    Right after a bulk load of hundreds of megabytes the server is still writing it out
    (InnoDB flushes its dirty pages in the background for tens of seconds; PostgreSQL's
    checkpointer likewise): a drain measured then competes with that write-back, which a
    table that grew over days does not. Every system's seed goes through here.
    """
    quoted = connection.ops.quote_name(table)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"ANALYZE {quoted}")
            cursor.execute("CHECKPOINT")  # the harness connects as a superuser
        elif connection.vendor == "mysql":
            # Flushes the table's changes to disk (and waits for purge), then releases it.
            cursor.execute(f"FLUSH TABLES {quoted} FOR EXPORT")
            cursor.execute("UNLOCK TABLES")
            cursor.execute(f"ANALYZE TABLE {quoted}")
            cursor.fetchall()
        else:
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
