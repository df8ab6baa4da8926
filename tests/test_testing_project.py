"""A project's own test suite that uses django_sqlqueue.testing (tests/testing_project/):
pytest-style tests with the plugin's fixtures and a Django TestCase, run by pytest in a child
process on the database under test, as a user's CI would run them.

The plugin reaches that pytest through the package's `pytest11` entry point; where plugin
autoloading is off, a project opts in with `-p django_sqlqueue.testing.pytest_plugin`, and
without it the fixtures do not exist.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runs import sqlite_runs_only

#: Each test runs a pytest of its own, bounded at 300 s.
pytestmark = pytest.mark.timeout(600)

PROJECT = Path(__file__).resolve().parent / "testing_project"


def run_suite(
    tmp_path: Path, *args: str, autoload: bool = True
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "PYTEST_"))}
    env.update(
        SQLQUEUE_TEST_TMP=str(tmp_path),
        SQLQUEUE_TEST_ID=f"{os.environ.get('SQLQUEUE_TEST_ID', '')}bk",
    )
    if not autoload:
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        args = ("-p", "pytest_django.plugin", *args)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", *args],
        cwd=PROJECT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_project_suite_passes_with_the_plugin_from_its_entry_point(tmp_path: Path) -> None:
    done = run_suite(tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "6 passed" in output, output
    plugins = next(line for line in output.splitlines() if line.startswith("plugins: "))
    assert "django-sqlqueue-" in plugins, "not loaded through its entry point"


#: How pytest finds the plugin does not depend on the database: tested in the SQLite runs.
sqlite_only = sqlite_runs_only("plugin loading does not depend on the database")


@sqlite_only
def test_opt_in_with_dash_p_where_autoloading_is_off(tmp_path: Path) -> None:
    done = run_suite(
        tmp_path,
        "-p",
        "django_sqlqueue.testing.pytest_plugin",
        "suite_plugin.py",
        "-k",
        "runs",
        autoload=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert "1 passed" in output, output


@sqlite_only
def test_without_the_plugin_its_fixtures_do_not_exist(tmp_path: Path) -> None:
    done = run_suite(tmp_path, "suite_plugin.py", "-k", "captured", autoload=False)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "fixture 'captured_jobs' not found" in output, output
