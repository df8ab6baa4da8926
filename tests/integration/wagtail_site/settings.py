"""Settings of the Wagtail site the integration test drives (tests/integration/test_wagtail.py).

A project as `wagtail start` makes it, plus django_sqlqueue as its `django.tasks` backend.
The test runs it as separate processes, configured by the environment:

- WAGTAIL_IT_DB: `postgres` or `sqlite`.
- WAGTAIL_IT_NAME: the database name (PostgreSQL) or file (SQLite).
- WAGTAIL_IT_TASKS: `queue` (our backend, tasks run by `runworkers`) or `immediate` (Django's
  ImmediateBackend, tasks run inside `enqueue()`: the reference the queue's outcome must equal).
- WAGTAIL_IT_MEDIA: the directory uploaded files go to.
- WAGTAIL_IT_SQLITE: `immediate` (the default: the project sets `transaction_mode` IMMEDIATE
  itself) or `defaults` (Django's defaults, as `startproject` leaves them, where the app
  begins transactions IMMEDIATE by itself: docs/databases.md).
"""

import os
from pathlib import Path

import django

VENDOR = os.environ.get("WAGTAIL_IT_DB", "sqlite")
DB_NAME = os.environ.get("WAGTAIL_IT_NAME", "")
TASKS_MODE = os.environ.get("WAGTAIL_IT_TASKS", "queue")
MEDIA_ROOT = os.environ.get("WAGTAIL_IT_MEDIA", "")
if not DB_NAME or not MEDIA_ROOT:
    raise RuntimeError("the Wagtail site needs WAGTAIL_IT_NAME and WAGTAIL_IT_MEDIA")

if VENDOR == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": DB_NAME,
            "USER": "postgres",
            "HOST": os.environ.get("PGHOST", "127.0.0.1"),
            "PORT": os.environ.get("PGPORT", "5432"),
        }
    }
elif VENDOR == "sqlite":
    DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": DB_NAME}}
    # WAGTAIL_IT_SQLITE=defaults keeps Django's defaults, as `startproject` leaves them.
    if os.environ.get("WAGTAIL_IT_SQLITE", "immediate") == "immediate":
        DATABASES["default"]["OPTIONS"] = {"transaction_mode": "IMMEDIATE"}
else:
    raise RuntimeError(f"WAGTAIL_IT_DB must be postgres or sqlite, not {VENDOR!r}")

# Django 6.0+ ships the framework; Django 5.2 has the django-tasks backport.
FRAMEWORK = "django.tasks" if django.VERSION >= (6, 0) else "django_tasks"
if TASKS_MODE == "queue":
    TASKS = {"default": {"BACKEND": "django_sqlqueue.backend.SQLQueueBackend"}}
elif TASKS_MODE == "immediate":
    TASKS = {"default": {"BACKEND": f"{FRAMEWORK}.backends.immediate.ImmediateBackend"}}
else:
    raise RuntimeError(f"WAGTAIL_IT_TASKS must be queue or immediate, not {TASKS_MODE!r}")

BASE_DIR = Path(__file__).resolve().parent
SECRET_KEY = "wagtail-integration-test-only"
DEBUG = False
ALLOWED_HOSTS = ["testserver", "localhost"]
USE_TZ = True
TIME_ZONE = "UTC"
LANGUAGE_CODE = "en-us"
USE_I18N = True

INSTALLED_APPS = [
    "tests.integration.wagtail_site",
    "wagtail.contrib.forms",
    "wagtail.contrib.redirects",
    "wagtail.contrib.frontend_cache",
    "wagtail.embeds",
    "wagtail.sites",
    "wagtail.users",
    "wagtail.snippets",
    "wagtail.documents",
    "wagtail.images",
    "wagtail.search",
    "wagtail.admin",
    "wagtail",
    "modelcluster",
    "taggit",
    "django_filters",
    "rangefilter",
    "django_sqlqueue",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
]
if FRAMEWORK == "django_tasks":
    INSTALLED_APPS.append("django_tasks")  # the backport's app, for its system checks
if VENDOR == "postgres":
    # Django 6.1 checks it for the search index's SearchVectorField (postgres.E005).
    INSTALLED_APPS.append("django.contrib.postgres")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "wagtail.contrib.redirects.middleware.RedirectMiddleware",
]

ROOT_URLCONF = "tests.integration.wagtail_site.urls"
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
# Logins are forced; hashing strength is of no use to a throwaway site.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

STATIC_URL = "/static/"
STATIC_ROOT = str(Path(MEDIA_ROOT) / "static")
MEDIA_URL = "/media/"
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
DATA_UPLOAD_MAX_NUMBER_FIELDS = 10_000

WAGTAIL_SITE_NAME = "sqlqueue integration"
WAGTAILADMIN_BASE_URL = "http://localhost"
WAGTAILSEARCH_BACKENDS = {"default": {"BACKEND": "wagtail.search.backends.database"}}
WAGTAILDOCS_EXTENSIONS = ["txt", "pdf"]
# Purges go to a backend that records each URL in a table, so the test can compare them.
WAGTAILFRONTENDCACHE = {
    "recorder": {"BACKEND": "tests.integration.wagtail_site.frontend_cache.RecordingBackend"}
}

# Short retry delays: a task Wagtail's own code fails once is retried within the test.
SQLQUEUE = {"POLL_INTERVAL": 0.2, "BACKOFF_BASE": 0.2, "BACKOFF_MAX": 1}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "loggers": {"django_sqlqueue": {"handlers": ["console"], "level": "WARNING"}},
}
