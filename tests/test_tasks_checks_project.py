"""`manage.py check` and the first enqueue of small projects whose TASKS names the backend
(tests/checks_project/), each in a fresh process: a check run in this one would find the app
installed.

- django_sqlqueue missing from INSTALLED_APPS: check reports django_sqlqueue.E102 wherever
  Django runs the task backends' checks, and the first enqueue fails with ImproperlyConfigured
  naming the fix, never with Django's RuntimeError about the Job model's app_label.
- The app installed: the backend's checks run even if nothing imports a task at start-up.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import django
import pytest

from tests.runs import sqlite_runs_only
from tests.tasksapp.tasks_settings import TASKS

REPO_ROOT = Path(__file__).resolve().parent.parent
FIX = "Add 'django_sqlqueue' to INSTALLED_APPS and run migrate."

pytestmark = [
    pytest.mark.skipif(not TASKS, reason="No Tasks framework: Django 5.2 without the backport"),
    sqlite_runs_only("settings only, no database"),
]


def run(settings: str, *args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    env.update(
        DJANGO_SETTINGS_MODULE=f"tests.checks_project.{settings}",
        SQLQUEUE_TEST_TMP=str(tmp_path),
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")])),
    )
    return subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_check_reports_e102_when_the_project_defines_tasks_at_start_up(tmp_path: Path) -> None:
    done = run("app_missing_tasks_at_startup", "-m", "django", "check", tmp_path=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "(django_sqlqueue.E102) TASKS['default'] uses SQLQueueBackend, but django_sqlqueue "
        "is not in INSTALLED_APPS." in done.stderr
    )
    assert FIX in done.stderr


def test_check_on_a_project_that_imports_no_task_at_start_up(tmp_path: Path) -> None:
    """Django 5.2: the backport's app registers the checks, E102 is reported. Django 6.x
    registers the task backends' checks only when `django.tasks` is first imported; nothing
    in this project does before `check` runs, so no backend is checked (docs/tasks.md says
    so): the first enqueue is where the mistake shows, next test."""
    done = run("app_missing", "-m", "django", "check", tmp_path=tmp_path)
    if django.VERSION < (6, 0):
        assert done.returncode == 1, done.stdout + done.stderr
        assert "django_sqlqueue.E102" in done.stderr
    else:
        assert done.returncode == 0, done.stdout + done.stderr
        assert "no issues" in done.stdout


@pytest.mark.parametrize("settings", ["app_missing", "app_missing_tasks_at_startup"])
@pytest.mark.parametrize(
    "call",
    ["hello.enqueue()", "hello.get_result('1')"],
)
def test_the_first_enqueue_names_the_fix(tmp_path: Path, settings: str, call: str) -> None:
    code = (
        f"import django\ndjango.setup()\nfrom tests.checks_project.shop.tasks import hello\n{call}"
    )
    done = run(settings, "-c", code, tmp_path=tmp_path)
    assert done.returncode == 1
    last_line = done.stderr.strip().splitlines()[-1]
    assert last_line == (
        "django.core.exceptions.ImproperlyConfigured: TASKS['default'] uses SQLQueueBackend, "
        f"but django_sqlqueue is not in INSTALLED_APPS. {FIX}"
    ), done.stderr
    assert "app_label" not in done.stderr


def test_with_the_app_installed_the_backends_checks_run_without_a_task_imported(
    tmp_path: Path,
) -> None:
    """Django 6.x registers them when django.tasks is imported: the app imports it at start-up
    where TASKS is set. (Django 5.2: the backport's app registers them.)"""
    done = run("app_installed", "-m", "django", "check", tmp_path=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "(django_sqlqueue.E101) TASKS['default']: OPTIONS['MAX_ATTEMPTS']" in done.stderr
