"""Settings of the django-sqlqueue example project: SQLite, the admin, and the `shop` jobs.

Everything that differs between machines comes from the environment:
DJANGO_DEBUG (off unless set to 1/true), DJANGO_SECRET_KEY (else a key made once and kept in
example_project/.secret_key), DJANGO_ALLOWED_HOSTS (comma-separated) and EXAMPLE_DB_PATH
(the SQLite file; default example_project/db.sqlite3).
"""

import os
import secrets
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def local_secret_key(path: Path) -> str:
    """A key made on first start and kept beside the project, so no key lives in the code.

    Made under a temporary name and linked into place, so two processes starting together
    (web server and workers) end up with the same key.
    """
    if not path.exists():
        temporary = path.with_name(f"{path.name}.{os.getpid()}")
        temporary.write_text(secrets.token_urlsafe(50))
        temporary.chmod(0o600)
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
        finally:
            temporary.unlink()
    return path.read_text().strip()


DEBUG = env_flag("DJANGO_DEBUG")
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY") or local_secret_key(BASE_DIR / ".secret_key")
ALLOWED_HOSTS = [
    host.strip()
    for host in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost").split(",")
    if host.strip()
]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rangefilter",
    "django_sqlqueue",
    "shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "demo_site.urls"
WSGI_APPLICATION = "demo_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Django's default SQLite settings, plus one option. django-sqlqueue itself switches the file
# to WAL mode (readers never wait for the workers' writes) and sets a busy timeout.
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("EXAMPLE_DB_PATH") or BASE_DIR / "db.sqlite3",
        "OPTIONS": {
            # Start every transaction.atomic() block with BEGIN IMMEDIATE, taking the write lock
            # up front. SQLite's default (DEFERRED) takes it at the first write; if a worker
            # writes in between, the upgrade fails at once with "database is locked", busy
            # timeout or not. IMMEDIATE waits its turn instead, within the busy timeout.
            "transaction_mode": "IMMEDIATE",
        },
    }
}

SQLQUEUE = {
    # Short retry delays so that retries and dead jobs show within a minute of the demo.
    "BACKOFF_BASE": 1.0,
    "BACKOFF_MAX": 20.0,
    "LEASE_SECONDS": 30,
    # A recurring job, enqueued by the supervisors every minute (admin: Job queue, Schedules).
    "SCHEDULES": {
        "inventory-sync": {
            "job": "shop.sync_inventory",
            "cron": "* * * * *",
            "kwargs": {"sku": "TEA-001", "failure_rate": 0.2},
        },
    },
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Emails are printed by the process that sends them: here, the workers.
EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"
DEFAULT_FROM_EMAIL = "shop@example.com"

# Seconds each of the sales report's steps takes (it has five).
SHOP_REPORT_STEP_SECONDS = float(os.environ.get("SHOP_REPORT_STEP_SECONDS", "0.6"))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"}
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "django_sqlqueue": {"handlers": ["console"], "level": "INFO"},
        "shop": {"handlers": ["console"], "level": "INFO"},
    },
}
