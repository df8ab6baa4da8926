"""Which of the suite's runs a test belongs to: each database's run, or the SQLite runs only."""

from __future__ import annotations

import os

import pytest


def sqlite_runs_only(why: str) -> pytest.MarkDecorator:
    """Skip this test outside the SQLite runs; `why` says why the database does not matter
    to it (the server runs would only repeat it, at a cost)."""
    return pytest.mark.skipif(
        os.environ.get("SQLQUEUE_TEST_DB", "sqlite") != "sqlite",
        reason=f"{why}: tested in the SQLite runs",
    )
