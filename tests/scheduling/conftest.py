"""Declaring schedules for one test: in SQLQUEUE["SCHEDULES"] or on a @job."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings


@pytest.fixture
def schedules_setting() -> Callable[[dict[str, Any]], AbstractContextManager[None]]:
    """`with schedules_setting({...}):` runs the block with these SQLQUEUE["SCHEDULES"]."""

    def override(entries: dict[str, Any]) -> AbstractContextManager[None]:
        return override_settings(SQLQUEUE={**settings.SQLQUEUE, "SCHEDULES": entries})

    return override


@pytest.fixture
def settings_schedules(
    schedules_setting: Callable[[dict[str, Any]], AbstractContextManager[None]],
) -> Iterator[Callable[[dict[str, Any]], None]]:
    """`settings_schedules({...})` sets SQLQUEUE["SCHEDULES"] until the test ends (callable
    again to change them, as a deployment would)."""
    active: list[AbstractContextManager[None]] = []

    def set_entries(entries: dict[str, Any]) -> None:
        while active:
            active.pop().__exit__(None, None, None)
        context = schedules_setting(entries)
        context.__enter__()
        active.append(context)

    yield set_entries
    while active:
        active.pop().__exit__(None, None, None)
