"""Test settings: the database comes from SQLQUEUE_TEST_DB (sqlite, postgres or mysql).

SQLQUEUE_TEST_ID makes the database names unique, so parallel runs never share one.
Worker processes spawned by tests get SQLQUEUE_TEST_DB_NAME: the test database pytest made.
"""

import json
import os
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent
VENDOR = os.environ.get("SQLQUEUE_TEST_DB", "sqlite")
RUN_ID = os.environ.get("SQLQUEUE_TEST_ID", "")
NAME_OVERRIDE = os.environ.get("SQLQUEUE_TEST_DB_NAME")
TMP = Path(os.environ.get("SQLQUEUE_TEST_TMP", "/tmp"))

if VENDOR == "sqlite":
    sqlite_name = str(TMP / f"sqlqueue_test{RUN_ID}.sqlite3")
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": NAME_OVERRIDE or sqlite_name,
            "TEST": {"NAME": NAME_OVERRIDE or str(TMP / f"test_sqlqueue{RUN_ID}.sqlite3")},
        }
    }
elif VENDOR == "postgres":
    direct = {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": NAME_OVERRIDE or "postgres",
        "USER": "postgres",
        "HOST": os.environ.get("PGHOST", "127.0.0.1"),
        "PORT": os.environ.get("PGPORT", "5432"),
        "TEST": {"NAME": f"test_sqlqueue{RUN_ID}"},
    }
    if os.environ.get("SQLQUEUE_TEST_PG_OPTIONS"):
        # The failover test (tests/workers/test_failover.py): HOST and PORT list a primary and
        # its standby, OPTIONS as docs/deployment.md gives them.
        direct["OPTIONS"] = json.loads(os.environ["SQLQUEUE_TEST_PG_OPTIONS"])
    DATABASES = {"default": direct}
    if os.environ.get("SQLQUEUE_TEST_PGBOUNCER_PORT"):
        # Processes of the PgBouncer tests (tests/pgbouncer): the queue through the suite's own
        # PgBouncer in transaction pooling mode, as a PgBouncer user sets it up; the server
        # itself as "direct", for LISTEN_DATABASE.
        pooled: dict[str, Any] = {
            **direct,
            "HOST": "127.0.0.1",
            "PORT": os.environ["SQLQUEUE_TEST_PGBOUNCER_PORT"],
            "DISABLE_SERVER_SIDE_CURSORS": os.environ.get("SQLQUEUE_TEST_SERVER_CURSORS") != "1",
        }
        if os.environ.get("SQLQUEUE_TEST_PREPARE_THRESHOLD"):
            pooled["OPTIONS"] = {
                "prepare_threshold": int(os.environ["SQLQUEUE_TEST_PREPARE_THRESHOLD"])
            }
        DATABASES = {"default": pooled, "direct": direct}
elif VENDOR == "mysql":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.mysql",
            "NAME": NAME_OVERRIDE or "test",
            "USER": "root",
            "PASSWORD": "",
            "HOST": os.environ.get("MYSQL_HOST", "127.0.0.1"),
            "PORT": os.environ.get("MYSQL_PORT", "3306"),
            "OPTIONS": {"charset": "utf8mb4"},
            "TEST": {"NAME": f"test_sqlqueue{RUN_ID}", "CHARSET": "utf8mb4"},
        }
    }
else:
    raise RuntimeError(f"SQLQUEUE_TEST_DB must be sqlite, postgres or mysql, not {VENDOR!r}")

if os.environ.get("SQLQUEUE_TEST_SQLITE_SOURCE"):
    # Processes of the movejobs tests: a project's old SQLite queue beside the test database.
    DATABASES["sqlite_source"] = {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ["SQLQUEUE_TEST_SQLITE_SOURCE"],
    }

SECRET_KEY = "tests-only-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "rangefilter",
    "django_sqlqueue",
    "tests.testapp",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "tests.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
SQLQUEUE = {
    "DATABASE": os.environ.get("SQLQUEUE_TEST_QUEUE_DATABASE", "default"),
    "LEASE_SECONDS": float(os.environ.get("SQLQUEUE_TEST_LEASE", "4")),
    "HEARTBEAT_SECONDS": float(os.environ.get("SQLQUEUE_TEST_HEARTBEAT", "1")),
    "BACKOFF_BASE": 0.2,
    "BACKOFF_MAX": 2,
    "POLL_INTERVAL": float(os.environ.get("SQLQUEUE_TEST_POLL", "0.2")),
    "DEFAULT_TIMEOUT": float(os.environ["SQLQUEUE_TEST_TIMEOUT"])
    if os.environ.get("SQLQUEUE_TEST_TIMEOUT")
    else None,
    "CANCEL_GRACE_SECONDS": float(os.environ.get("SQLQUEUE_TEST_CANCEL_GRACE", "5")),
    "BATCH_COMPLETION": os.environ.get("SQLQUEUE_TEST_BATCH_COMPLETION") == "1",
    "POSTGRESQL_ASYNC_COMPLETION": {"1": True, "0": False}.get(
        os.environ.get("SQLQUEUE_TEST_ASYNC_COMPLETION", "")
    ),
    "LISTEN_DATABASE": os.environ.get("SQLQUEUE_TEST_LISTEN_DATABASE") or None,
    "PRUNE_COMPLETED_AFTER_DAYS": (
        None
        if os.environ.get("SQLQUEUE_TEST_PRUNE_DAYS") == "none"
        else float(os.environ.get("SQLQUEUE_TEST_PRUNE_DAYS", "7"))
    ),
    # Recurring jobs of the supervisors a test starts (tests/workers/test_schedules.py).
    "SCHEDULES": json.loads(os.environ.get("SQLQUEUE_TEST_SCHEDULES", "{}")),
    # Per-queue rate limits of the workers a test starts (tests/workers/test_flow_limits.py).
    "QUEUE_RATE_LIMITS": json.loads(os.environ.get("SQLQUEUE_TEST_QUEUE_RATE_LIMITS", "{}")),
    # Queues with worker processes of their own (tests/workers/test_concurrency.py).
    "QUEUES": json.loads(os.environ.get("SQLQUEUE_TEST_QUEUES", "{}")),
}
LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_sqlqueue": {"handlers": ["console"], "level": "INFO"}},
}
if os.environ.get("SQLQUEUE_TEST_SIGNAL_ON"):  # signal a process when it logs a message
    LOGGING["handlers"]["signal"] = {
        "()": "tests.testapp.signal_on_log.SignalOnLog",
        "spec": os.environ["SQLQUEUE_TEST_SIGNAL_ON"],
        "once_file": os.environ.get("SQLQUEUE_TEST_SIGNAL_ONCE"),
    }
    LOGGING["loggers"]["django_sqlqueue"]["handlers"].append("signal")

# django.tasks (issue 6): the backend under test, and the backport's app on Django 5.2.
from tests.tasksapp.tasks_settings import TASKS, TASKS_APPS  # noqa: E402, F401

INSTALLED_APPS += TASKS_APPS

# Staff users are created for nearly every admin test: a fast hasher, as Django's testing docs
# advise (the default PBKDF2 spends most of a second per login and per user created).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
