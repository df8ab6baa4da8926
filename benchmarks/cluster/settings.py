"""Django settings of the cluster run: the chaos project's queue settings, jobs and side
tables, on the run's private PostgreSQL.

Each process learns where that server is from the environment the harness gives it: the
socket directory for the harness itself, the bridge address (or its relay port) for hosts
and producers in their namespaces.
"""

import os

from benchmarks.chaos.settings import *  # noqa: F403
from benchmarks.chaos.settings import INSTALLED_APPS

from .pgserver import DB_USER, PORT

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("CLUSTER_DB_NAME", "cluster_sqlqueue"),
        "USER": DB_USER,
        "HOST": os.environ.get("CLUSTER_PG_HOST", "/nonexistent"),
        "PORT": os.environ.get("CLUSTER_PG_PORT", str(PORT)),
    }
}
INSTALLED_APPS = [*INSTALLED_APPS, "benchmarks.cluster"]
