"""TASKS names SQLQueueBackend; INSTALLED_APPS lacks django_sqlqueue. Nothing imports a task
at start-up: the project's tasks are imported by its views."""

import os
from pathlib import Path

from tests.tasksapp.tasks_settings import TASKS_APPS

SECRET_KEY = "tests-only-not-secret"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", *TASKS_APPS]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": str(Path(os.environ.get("SQLQUEUE_TEST_TMP", "/tmp")) / "checks_project.sqlite3"),
    }
}
TASKS = {"default": {"BACKEND": "django_sqlqueue.backend.SQLQueueBackend"}}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
