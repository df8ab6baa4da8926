"""The systems under test, by the name used on the command line."""

from __future__ import annotations

from importlib import import_module

from .base import System, Unsupported

#: name -> (module, class, databases). Databases are listed here so the planner need not
#: import the peers (or Django) to know where each one runs.
SYSTEMS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "sqlqueue": ("sqlqueue", "SQLQueue", ("sqlite", "postgres", "mysql")),
    "sqlqueue_batch": ("sqlqueue", "SQLQueueBatched", ("sqlite", "postgres", "mysql")),
    "tasks_db": ("tasks_db", "TasksDB", ("sqlite", "postgres", "mysql")),
    "procrastinate": ("procrastinate_peer", "Procrastinate", ("postgres",)),
    "huey": ("huey_peer", "Huey", ("sqlite",)),
}

#: The modules each peer needs, from the `bench` extra (name -> (module, package)).
PEER_MODULES: dict[str, tuple[tuple[str, str], ...]] = {
    "tasks_db": (("django_tasks_db", "django-tasks-db"),),
    "procrastinate": (("procrastinate", "procrastinate"), ("psycopg_pool", "psycopg[pool]")),
    "huey": (("huey", "huey"),),
}
#: The driver each database needs (the `postgres` and `mysql` extras, both in `dev`).
DRIVER_MODULES: dict[str, tuple[str, str, str]] = {
    "postgres": ("psycopg", "psycopg", "postgres"),
    "mysql": ("MySQLdb", "mysqlclient", "mysql"),
}


def system_class(name: str) -> type[System]:
    module, cls, _ = SYSTEMS[name]
    return getattr(import_module(f"{__name__}.{module}"), cls)


def systems_for(vendor: str) -> list[str]:
    return [name for name, (_, _, dbs) in SYSTEMS.items() if vendor in dbs]


__all__ = [
    "DRIVER_MODULES",
    "PEER_MODULES",
    "SYSTEMS",
    "System",
    "Unsupported",
    "system_class",
    "systems_for",
]
