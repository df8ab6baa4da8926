"""docs/install.md names every table `migrate` creates for the app, and every extra of
pyproject.toml a user installs (a first-day reader counted two tables where there were seven)."""

from __future__ import annotations

from pathlib import Path

import tomllib
from django.apps import apps

ROOT = Path(__file__).resolve().parent.parent
INSTALL = (ROOT / "docs" / "install.md").read_text()
#: Extras for the project's own work, not a user's install.
OWN_EXTRAS = {"bench", "wagtail-it", "test", "docs", "browser", "dev"}


def test_every_table_of_the_app_is_listed() -> None:
    tables = {model._meta.db_table for model in apps.get_app_config("django_sqlqueue").get_models()}
    assert tables, "the app has models"
    missing = sorted(table for table in tables if f"`{table}`" not in INSTALL)
    assert not missing, f"docs/install.md does not name {missing}"
    count = {2: "two", 9: "nine", 10: "ten", 11: "eleven"}.get(len(tables), str(len(tables)))
    assert f"The app adds {count} tables" in INSTALL


def test_every_user_extra_has_its_install_line() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = set(pyproject["project"]["optional-dependencies"]) - OWN_EXTRAS
    missing = sorted(e for e in extras if f'"./django-sqlqueue[{e}]"' not in INSTALL)
    assert not missing, f"docs/install.md has no install line for {missing}"
