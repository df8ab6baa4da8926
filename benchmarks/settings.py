"""Django settings of the benchmark project: one system under test at a time.

Only the app of the system being measured is installed (BENCH_SYSTEM), so no system gets
another's connection tuning (django-sqlqueue, for one, turns on WAL for SQLite databases).
Everything else is Django's and each system's defaults.
"""

import os

from benchmarks.databases import PEER_SQLITE_TUNING, django_database

VENDOR = os.environ.get("BENCH_DB", "sqlite")
SYSTEM = os.environ.get("BENCH_SYSTEM", "sqlqueue")

SYSTEM_APPS = {
    "sqlqueue": ["django_sqlqueue"],
    "sqlqueue_batch": ["django_sqlqueue"],
    "raw": ["django_sqlqueue"],
    "tasks_db": ["django_tasks_db"],
    "procrastinate": ["procrastinate.contrib.django"],
    "huey": [],
    # Django and the benchmark's own app, nothing else: the check_floor scenario's project.
    "bare": [],
}

SECRET_KEY = "benchmarks-only-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
DATABASES = {"default": django_database(VENDOR)}
if os.environ.get("BENCH_TUNE_PEERS") and SYSTEM not in ("sqlqueue", "sqlqueue_batch", "raw"):
    # Opt-in (--tune-peers): give Django-based peers what django-sqlqueue's worker does for
    # itself, to compare queue designs rather than configurations: persistent connections
    # (Django's default CONN_MAX_AGE=0 reconnects after every task) and, on SQLite, WAL with
    # synchronous=NORMAL and a busy timeout.
    DATABASES["default"]["CONN_MAX_AGE"] = None
    if VENDOR == "sqlite":
        DATABASES["default"]["OPTIONS"] = {"init_command": PEER_SQLITE_TUNING}
INSTALLED_APPS = [*SYSTEM_APPS[SYSTEM], "benchmarks.jobsapp"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
if SYSTEM == "tasks_db":
    TASKS = {"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}}
if SYSTEM == "sqlqueue_batch":
    SQLQUEUE = {"BATCH_COMPLETION": True}
