"""Bad declarations are system check errors that name the schedule and the fix."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from django_sqlqueue.checks import check_schedules, check_settings
from django_sqlqueue.exceptions import InvalidJobError
from django_sqlqueue.registry import job, registry

Entries = Callable[[dict[str, Any]], None]


def errors(settings_schedules: Entries, entries: dict[str, Any]) -> list[tuple[str, str, str]]:
    settings_schedules(entries)
    return [(e.id or "", e.msg, e.hint or "") for e in check_schedules()]


def one(settings_schedules: Entries, entry: Any) -> tuple[str, str, str]:
    found = errors(settings_schedules, {"nightly": entry})
    assert len(found) == 1, found
    return found[0]


GOOD = {"job": "tests.record", "cron": "0 3 * * *"}


def test_good_declarations_pass(settings_schedules: Entries) -> None:
    assert errors(settings_schedules, {"a": GOOD, "b": {**GOOD, "kwargs": {"label": "x"}}}) == []


@pytest.mark.parametrize(
    ("entry", "check_id", "words"),
    [
        ("0 3 * * *", "E020", "must be a dict, not str"),
        ({**GOOD, "timzone": "UTC"}, "E020", "unknown key 'timzone'"),
        ({"job": "tests.record"}, "E020", "has no 'cron'"),
        ({**GOOD, "cron": "0 3 * *"}, "E021", "'0 3 * *' has 4 fields"),
        ({**GOOD, "cron": "0 25 * * *"}, "E021", "not a valid cron expression"),
        ({**GOOD, "cron": "0 0 30 2 *"}, "E021", "never matches"),
        ({**GOOD, "timezone": "Europe/Pariss"}, "E022", "unknown time zone 'Europe/Pariss'"),
        ({**GOOD, "job": "tests.recrod"}, "E023", "names the job 'tests.recrod'"),
        ({**GOOD, "kwargs": [1]}, "E024", "kwargs must be a dict, not list"),
        ({**GOOD, "kwargs": {"label": {1, 2}}}, "E024", "cannot be stored"),
        ({**GOOD, "kwargs": {"colour": "red"}}, "E024", "unexpected keyword argument 'colour'"),
        ({"job": "tests.add", "cron": "0 3 * * *", "kwargs": {"a": 1}}, "E024", "'b'"),
        ({**GOOD, "missed": "never"}, "E025", "missed='never' is not a policy"),
        ({**GOOD, "queue": "a,b"}, "E025", "contains a comma"),
        ({**GOOD, "priority": 1000}, "E025", "priority must be between"),
    ],
)
def test_each_problem_names_the_schedule(
    settings_schedules: Entries, entry: Any, check_id: str, words: str
) -> None:
    found_id, message, hint = one(settings_schedules, entry)
    assert found_id == f"django_sqlqueue.{check_id}"
    assert message.startswith("Schedule 'nightly' (SQLQUEUE['SCHEDULES'])")
    assert words in message
    assert hint  # and says what to do


def test_hints_say_the_fix(settings_schedules: Entries) -> None:
    assert "timzone" in one(settings_schedules, {**GOOD, "timzone": "UTC"})[1]
    assert "Did you mean 'timezone'?" in one(settings_schedules, {**GOOD, "timzone": "UTC"})[2]
    assert "e.g. '0 3 * * *'" in one(settings_schedules, {**GOOD, "cron": "* *"})[2]


def test_a_decorator_schedule_is_checked_too(register_job: Any) -> None:
    def nightly(*, fmt: str) -> None:
        return None

    register_job("tests.cron_bad", nightly, cron="0 3 * *", cron_kwargs={"fmt": "pdf"})
    register_job("tests.cron_args", nightly, cron="0 3 * * *", cron_kwargs={"format": "pdf"})
    found = {e.id: e.msg for e in check_schedules()}
    assert found["django_sqlqueue.E021"].startswith("Schedule 'tests.cron_bad' (@job on ")
    assert "test_checks.py" in found["django_sqlqueue.E021"]  # where the @job is
    assert "does not accept kwargs {'format': 'pdf'}" in found["django_sqlqueue.E024"]
    # Python's own words for it: "missing a required (keyword-only) argument: 'fmt'".
    assert "missing a required" in found["django_sqlqueue.E024"]
    assert "argument: 'fmt'" in found["django_sqlqueue.E024"]


def test_a_settings_key_may_not_take_a_decorator_schedules_key(
    settings_schedules: Entries, register_job: Any
) -> None:
    register_job("tests.cron_job", cron="0 3 * * *")
    [(check_id, message, _)] = errors(settings_schedules, {"tests.cron_job": GOOD})
    assert check_id == "django_sqlqueue.E020" and "keys must be unique" in message


def test_a_context_taking_job_is_bound_without_its_context(settings_schedules: Entries) -> None:
    # tests.record(context, label="", sleep=0.0)
    assert errors(settings_schedules, {"r": {**GOOD, "kwargs": {"label": "x", "sleep": 0}}}) == []


def test_schedules_that_are_not_a_dict_are_a_settings_error(schedules_setting: Any) -> None:
    with schedules_setting(["nightly"]):  # type: ignore[arg-type]
        assert [e.id for e in check_settings()] == ["django_sqlqueue.E003"]
        assert check_schedules() == []


def test_schedule_options_without_a_cron_fail_at_the_decorator() -> None:
    with pytest.raises(InvalidJobError, match="timezone, missed only apply to a recurring job"):
        job("tests.not_scheduled", timezone="UTC", missed="skip")(lambda: None)
    assert "tests.not_scheduled" not in registry


@pytest.mark.django_db
def test_the_check_command_reports_them(settings_schedules: Entries) -> None:
    settings_schedules({"nightly": {**GOOD, "cron": "0 3 * *"}})
    out = io.StringIO()
    with pytest.raises(SystemCheckError) as raised:
        call_command("check", stdout=out, stderr=out)
    assert "(django_sqlqueue.E021) Schedule 'nightly'" in str(raised.value)
