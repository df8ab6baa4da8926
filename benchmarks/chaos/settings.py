"""Django settings of the chaos project: the queue, its side tables, and a short lease.

A short lease (CHAOS_LEASE, 4 s by default) makes lost jobs come back within seconds, so a
two-minute run sees many recoveries; short backoff keeps retries inside the run.
"""

from benchmarks.chaos import config

SECRET_KEY = "chaos-harness-only-not-secret"
DEBUG = False
USE_TZ = True
TIME_ZONE = "UTC"
DATABASES = {"default": config.django_database()}
INSTALLED_APPS = ["django_sqlqueue", "benchmarks.chaos.app"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LEASE_SECONDS = config.lease_seconds()
SQLQUEUE = {
    "LEASE_SECONDS": LEASE_SECONDS,
    "HEARTBEAT_SECONDS": LEASE_SECONDS / 4,
    "MAX_ATTEMPTS": 4,
    "BACKOFF_BASE": 0.2,
    "BACKOFF_MAX": 1.0,
    "POLL_INTERVAL": 0.5,
    "GRACE_PERIOD": 2,
    # Every row is evidence: nothing may be pruned before the checks have read it.
    "PRUNE_COMPLETED_AFTER_DAYS": None,
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s [%(process)d] %(name)s: %(message)s"}
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {"django_sqlqueue": {"handlers": ["console"], "level": "INFO"}},
}
