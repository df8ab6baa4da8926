"""django_sqlqueue installed, a backend OPTIONS value it cannot use, and no task imported at
start-up: the backend's checks must run all the same."""

from tests.checks_project.app_missing import *  # noqa: F403
from tests.checks_project.app_missing import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_sqlqueue"]
TASKS = {
    "default": {
        "BACKEND": "django_sqlqueue.backend.SQLQueueBackend",
        "OPTIONS": {"MAX_ATTEMPTS": 0},
    }
}
