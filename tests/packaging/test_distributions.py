"""The sdist and the wheel a release would upload: built as a release builds them (the wheel
from the sdist, in an isolated environment), checked by twine, holding every file of the
package (templates, static files, translations, migrations, py.typed, the pytest plugin's
entry point), and working once installed: Django's checks pass and no migration is missing.

Building takes a quarter of a minute, so scripts/test.sh runs this as a step of its own
(SQLQUEUE_TEST_PACKAGING=1) instead of in every pytest run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("SQLQUEUE_TEST_PACKAGING") != "1",
        reason="builds the distributions: run by scripts/test.sh's package step",
    ),
    pytest.mark.timeout(1500),  # its own bounds: 600 s to build, 300 s per install
]


def package_files() -> set[str]:
    """Every file of the package in the source tree, as a path from the repository root."""
    return {
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "django_sqlqueue").rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the checkout without its build leftovers: setuptools would take the file
    list of the egg-info an editable install left behind, and ship what it lists, not what
    pyproject.toml says."""
    copy = tmp_path_factory.mktemp("source") / "django-sqlqueue"
    shutil.copytree(
        ROOT,
        copy,
        ignore=shutil.ignore_patterns(
            ".git", ".venv*", "*.egg-info", "build", "dist", "site", "__pycache__", ".*cache"
        ),
    )
    return copy


@pytest.fixture(scope="module")
def dist(source: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    yield out


def only(dist: Path, pattern: str) -> Path:
    [found] = dist.glob(pattern)
    return found


def test_twine_check_passes(dist: Path) -> None:
    files = [str(path) for path in sorted(dist.iterdir())]
    done = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", *files],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_wheel_holds_every_file_of_the_package(dist: Path) -> None:
    names = set(zipfile.ZipFile(only(dist, "*.whl")).namelist())
    assert package_files() - names == set()
    for required in (
        "django_sqlqueue/py.typed",
        "django_sqlqueue/static/django_sqlqueue/admin.css",
        "django_sqlqueue/templates/django_sqlqueue/admin/job_change_list.html",
        "django_sqlqueue/migrations/0001_initial.py",
        "django_sqlqueue/testing/pytest_plugin.py",
        "django_sqlqueue/locale/fr/LC_MESSAGES/django.po",
        "django_sqlqueue/locale/fr/LC_MESSAGES/django.mo",
    ):
        assert required in names
    [entry_points] = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(only(dist, "*.whl")).read(entry_points).decode()
    assert "[pytest11]" in text and "django_sqlqueue.testing.pytest_plugin" in text


def test_the_sdist_holds_every_file_of_the_package(dist: Path) -> None:
    with tarfile.open(only(dist, "*.tar.gz")) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert package_files() - names == set()
    assert {"README.md", "pyproject.toml"} <= names


def test_the_installed_wheel_passes_checks_with_no_migration_missing(
    dist: Path, tmp_path: Path
) -> None:
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(only(dist, "*.whl")),
        ],
        check=True,
        timeout=300,
    )
    env = {
        **os.environ,
        # The wheel's package first; the checkout for tests.settings only.
        "PYTHONPATH": os.pathsep.join([str(target), str(ROOT)]),
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "SQLQUEUE_TEST_DB": "sqlite",
        "SQLQUEUE_TEST_TMP": str(tmp_path),
    }
    code = (
        "import django, django_sqlqueue; django.setup()\n"
        "from django.core.management import call_command\n"
        "from django.template.loader import get_template\n"
        f"assert django_sqlqueue.__file__.startswith({str(target)!r}), django_sqlqueue.__file__\n"
        "get_template('django_sqlqueue/admin/job_change_list.html')\n"
        "call_command('check')\n"
        "call_command('makemigrations', 'django_sqlqueue', check=True, dry_run=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tmp_path,  # not the checkout, whose django_sqlqueue/ would come first
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_readme_installs_from_a_checkout_as_it_says(source: Path, tmp_path: Path) -> None:
    """`pip install django-sqlqueue` finds nothing until a release: the README's command
    installs the checkout itself, which must work as written."""
    readme = (ROOT / "README.md").read_text()
    commands = [
        line.split("#")[0].strip()
        for line in readme.splitlines()
        if line.startswith("pip install") and "django-sqlqueue" in line
    ]
    assert commands == ["pip install ./django-sqlqueue"], commands
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(tmp_path / "site"),
            str(source),
        ],
        check=True,
        timeout=300,
    )
    assert (tmp_path / "site" / "django_sqlqueue" / "templates").is_dir()
