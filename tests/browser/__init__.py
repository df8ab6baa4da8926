"""Tests in a real browser (Chromium driven by Selenium)."""

from __future__ import annotations

from tests.runs import sqlite_runs_only

#: The browser tests check what a browser shows and does; the views and queries behind every
#: page run on each database in tests/test_admin and tests/test_observability. So they run in
#: the SQLite runs only: a minute and a half saved on each server's run.
SQLITE_RUNS_ONLY = sqlite_runs_only("what the browser shows does not depend on the database")
