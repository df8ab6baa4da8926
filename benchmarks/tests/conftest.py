"""Fixtures shared by the harness's tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.chaos import ledger


@pytest.fixture
def empty_ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chaos harness's atomic-job ledger, empty, in this test's own directory, with no
    file of this process open yet."""
    monkeypatch.setenv("CHAOS_DIR", str(tmp_path))
    monkeypatch.setenv("CHAOS_DB_NAME", "chaos_ledger_test")
    monkeypatch.setattr(ledger, "_fd", None)
    ledger.clear()
