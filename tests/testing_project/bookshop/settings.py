"""Settings of the test project: the database under test comes from SQLQUEUE_TEST_DB, as in
the repository's own tests/settings.py, under names of its own."""

import os
from pathlib import Path

VENDOR = os.environ.get("SQLQUEUE_TEST_DB", "sqlite")
RUN_ID = os.environ.get("SQLQUEUE_TEST_ID", "")
TMP = Path(os.environ.get("SQLQUEUE_TEST_TMP", "/tmp"))

if VENDOR == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": "postgres",
            "USER": "postgres",
            "HOST": os.environ.get("PGHOST", "127.0.0.1"),
            "PORT": os.environ.get("PGPORT", "5432"),
            "TEST": {"NAME": f"test_bookshop{RUN_ID}"},
        }
    }
elif VENDOR == "mysql":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.mysql",
            "NAME": "test",
            "USER": "root",
            "HOST": os.environ.get("MYSQL_HOST", "127.0.0.1"),
            "PORT": os.environ.get("MYSQL_PORT", "3306"),
            "OPTIONS": {"charset": "utf8mb4"},
            "TEST": {"NAME": f"test_bookshop{RUN_ID}", "CHARSET": "utf8mb4"},
        }
    }
else:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(TMP / f"bookshop{RUN_ID}.sqlite3"),
            "TEST": {"NAME": str(TMP / f"test_bookshop{RUN_ID}.sqlite3")},
        }
    }

SECRET_KEY = "bookshop-tests-only"
USE_TZ = True
INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_sqlqueue",
    "bookshop",
]
ROOT_URLCONF = "bookshop.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
