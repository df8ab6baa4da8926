"""System checks report a misconfigured SQLQUEUE at start-up, with the fix."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError
from django.test.utils import override_settings

from django_sqlqueue.checks import (
    HANDLERS_SAMPLE,
    check_clock,
    check_database,
    check_job_handlers,
    check_settings,
    unknown_setting,
)
from django_sqlqueue.conf import DEFAULTS, SETTINGS, Setting, get_settings


def ids(**sqlqueue: Any) -> list[str]:
    """The ids of the errors check_settings reports for this SQLQUEUE dict."""
    with override_settings(SQLQUEUE=sqlqueue):
        return [message.id for message in check_settings()]


def messages(**sqlqueue: Any) -> list[str]:
    with override_settings(SQLQUEUE=sqlqueue):
        return [f"{message.msg} {message.hint or ''}" for message in check_settings()]


class TestSettingsCheck:
    def test_the_test_settings_are_clean(self) -> None:
        assert check_settings() == []

    def test_no_sqlqueue_setting_at_all(self, settings: Any) -> None:
        del settings.SQLQUEUE
        assert check_settings() == []

    def test_every_default_is_valid(self) -> None:
        assert ids(**DEFAULTS) == []

    def test_not_a_dict(self) -> None:
        with override_settings(SQLQUEUE=[("LEASE_SECONDS", 10)]):
            [error] = check_settings()
        assert error.id == "django_sqlqueue.E001"
        assert "must be a dict" in error.msg

    def test_unknown_key(self) -> None:
        assert ids(LEASE_SECONDS=30, LEASE_SECOND=30) == ["django_sqlqueue.E002"]
        [text] = messages(LEASE_SECOND=30)
        assert "'LEASE_SECOND'" in text
        assert "LEASE_SECONDS" in text, "the hint lists the known settings"

    def test_a_misspelled_key_gets_a_suggestion(self) -> None:
        [text] = messages(LEASE_SECOND=30)
        assert "Did you mean 'LEASE_SECONDS'?" in text
        [text] = messages(max_attempts=3)
        assert "Did you mean 'MAX_ATTEMPTS'?" in text
        [text] = messages(COLOUR="blue")
        assert "Did you mean" not in text

    def test_every_unknown_key_is_reported(self) -> None:
        assert ids(FOO=1, BAR=2) == ["django_sqlqueue.E002"] * 2

    @pytest.mark.parametrize(
        ("key", "value"),
        [
            ("MAX_ATTEMPTS", 0),
            ("MAX_ATTEMPTS", "5"),
            ("MAX_ATTEMPTS", True),
            ("BACKOFF_BASE", -1),
            ("BACKOFF_MAX", -0.5),
            ("LEASE_SECONDS", 0),
            ("LEASE_SECONDS", None),
            ("GRACE_PERIOD", -1),
            ("POLL_INTERVAL", 0),
            ("BATCH_SIZE", 0),
            ("SQLITE_BUSY_TIMEOUT", -1),
            ("HEARTBEAT_SECONDS", 0),
            ("HEARTBEAT_SECONDS", "1"),
            ("DEFAULT_TIMEOUT", -5),
            ("DEFAULT_TIMEOUT", False),
            ("BACKOFF_JITTER", 1.5),
            ("BACKOFF_JITTER", -0.1),
            ("BACKOFF_JITTER", "lots"),
            ("SQLITE_TRANSACTION_MODE", "LAZY"),
            ("SQLITE_TRANSACTION_MODE", 1),
        ],
        ids=lambda v: repr(v),
    )
    def test_bad_value(self, key: str, value: Any) -> None:
        assert ids(**{key: value}) == ["django_sqlqueue.E003"]
        assert any(key in text for text in messages(**{key: value}))

    @pytest.mark.parametrize(
        ("key", "value"),
        [
            ("DEFAULT_PRIORITY", 500),
            ("DEFAULT_PRIORITY", "high"),
            ("DEFAULT_QUEUE", ""),
            ("DEFAULT_QUEUE", 5),
            ("DEFAULT_QUEUE", "mail,sms"),
            ("DEFAULT_QUEUE", "x" * 101),
            ("DATABASE", 5),
            ("MAX_ATTEMPTS", 2.5),
            ("BATCH_SIZE", 10.0),
            ("SQLITE_TUNE", "yes"),
            ("AUTODISCOVER", 1),
            ("SQLITE_SYNCHRONOUS", "FAST"),
        ],
        ids=lambda v: repr(v),
    )
    def test_bad_value_that_would_break_every_enqueue(self, key: str, value: Any) -> None:
        """Each of these makes every enqueue (or start-up) fail; say so before that."""
        assert ids(**{key: value}) != []

    @pytest.mark.parametrize(
        ("key", "value"),
        [
            ("MAX_ATTEMPTS", 1),
            ("BACKOFF_BASE", 0),
            ("BACKOFF_JITTER", 0),
            ("BACKOFF_JITTER", 1),
            ("HEARTBEAT_SECONDS", None),
            ("DEFAULT_TIMEOUT", None),
            ("DEFAULT_TIMEOUT", 0.5),
            ("POLL_INTERVAL", 0.05),
            ("DEFAULT_PRIORITY", -100),
            ("SQLITE_TUNE", False),
            ("AUTODISCOVER", False),
            ("SQLITE_TRANSACTION_MODE", None),
            ("SQLITE_TRANSACTION_MODE", "deferred"),
        ],
        ids=lambda v: repr(v),
    )
    def test_good_value(self, key: str, value: Any) -> None:
        assert ids(**{key: value}) == []

    @pytest.mark.parametrize(
        ("lease", "heartbeat", "ok"),
        [(60, 59, True), (60, 60, False), (60, 61, False), (10, 3.5, True), (None, 60, False)],
    )
    def test_heartbeat_must_be_shorter_than_the_lease(
        self, lease: float | None, heartbeat: float, ok: bool
    ) -> None:
        conf = {"HEARTBEAT_SECONDS": heartbeat}
        if lease is not None:
            conf["LEASE_SECONDS"] = lease  # None: the default lease of 60 seconds
        assert ("django_sqlqueue.E004" not in ids(**conf)) is ok

    def test_unknown_database_alias(self) -> None:
        assert ids(DATABASE="queue") == ["django_sqlqueue.E005"]
        [text] = messages(DATABASE="queue")
        assert "'queue'" in text
        assert "default" in text, "the hint lists the configured aliases"

    def test_known_database_alias(self) -> None:
        assert ids(DATABASE="default") == []

    def test_check_command_fails_on_a_bad_setting(self) -> None:
        bad = {"LEASE_SECONDS": 10, "HEARTBEAT_SECONDS": 20, "X": 1}
        with override_settings(SQLQUEUE=bad), pytest.raises(SystemCheckError) as info:
            call_command("check", stdout=io.StringIO(), stderr=io.StringIO())
        assert "django_sqlqueue.E002" in str(info.value)
        assert "django_sqlqueue.E004" in str(info.value)

    def test_check_command_passes_with_the_test_settings(self) -> None:
        out = io.StringIO()
        call_command("check", stdout=out, stderr=io.StringIO())
        assert "no issues" in out.getvalue()

    @pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
    def test_the_runtime_refuses_what_the_checks_refuse(self, setting: Setting) -> None:
        """One parse function per setting serves the checks and get_settings()."""
        bad = "" if setting.name != "SQLITE_SYNCHRONOUS" else "FAST"
        assert ids(**{setting.name: bad}) != []
        with (
            override_settings(SQLQUEUE={setting.name: bad}),
            pytest.raises(ImproperlyConfigured, match=setting.name),
        ):
            get_settings()

    def test_settings_are_read_afresh(self) -> None:
        with override_settings(SQLQUEUE={"LEASE_SECONDS": 90}):
            conf = get_settings()
        assert conf.lease_seconds == 90
        assert conf.heartbeat_seconds == 30, "default heartbeat is a third of the lease"


@pytest.mark.django_db
class TestDatabaseCheck:
    def test_this_database_can_claim(self, alias: str) -> None:
        assert check_database(databases=[alias]) == []

    def test_skipped_unless_the_queue_database_is_checked(self) -> None:
        assert check_database(databases=None) == []
        assert check_database(databases=["other"]) == []

    def test_check_database_command(self, alias: str) -> None:
        out = io.StringIO()
        call_command("check", "--database", alias, stdout=out, stderr=io.StringIO())
        assert "no issues" in out.getvalue()


@pytest.mark.django_db
class TestHandlersCheck:
    """W031: due jobs whose name no handler of this process has (declared outside an app's
    jobs.py, or the code moved) would go dead; `runworkers` says so when it starts."""

    def test_due_jobs_without_a_handler_are_named_with_where_handlers_live(
        self, make_job: Any, alias: str
    ) -> None:
        make_job(name="shop.moved_away")
        make_job(name="shop.moved_away", status="failed")
        make_job(name="tests.noop")
        [warning] = check_job_handlers(databases=[alias])
        assert warning.id == "django_sqlqueue.W031"
        assert "2 of the next due jobs are named 'shop.moved_away'" in warning.msg
        assert "jobs.py" in warning.hint and "AppConfig.ready()" in warning.hint

    def test_finished_jobs_and_django_tasks_are_not_reported(
        self, make_job: Any, alias: str
    ) -> None:
        make_job(name="shop.gone", status="dead")
        make_job(name="shop.gone", status="completed")
        make_job(name="shop.tasks.send", backend="default")  # run by importing the task
        assert check_job_handlers(databases=[alias]) == []

    def test_it_reads_only_the_next_due_jobs(self, make_job: Any, alias: str) -> None:
        from django_sqlqueue.models import Job

        make_job(name="shop.later", priority=-5)
        Job.objects.using(alias).bulk_create(
            Job(name="tests.noop", priority=5) for _ in range(HANDLERS_SAMPLE)
        )
        assert check_job_handlers(databases=[alias]) == []

    def test_skipped_unless_the_queue_database_is_checked(self, make_job: Any) -> None:
        make_job(name="shop.moved_away")
        assert check_job_handlers(databases=None) == []

    def test_check_database_command(self, make_job: Any, alias: str) -> None:
        make_job(name="shop.moved_away")
        err = io.StringIO()
        call_command("check", "--database", alias, stdout=io.StringIO(), stderr=err)
        assert "django_sqlqueue.W031" in err.getvalue()


class TestSettingsPage:
    """docs/settings.md documents exactly the settings of the table, with their defaults."""

    PAGE = (Path(__file__).resolve().parents[1] / "docs" / "settings.md").read_text()

    @staticmethod
    def literal(value: Any) -> str:
        return json.dumps(value) if isinstance(value, str) else repr(value)

    def summary_rows(self) -> dict[str, tuple[str, str]]:
        rows = re.findall(r"^\| \[`(\w+)`\]\(#\w+\) \| (.+?) \| (.+?) \|$", self.PAGE, re.M)
        return {name: (default, short) for name, default, short in rows}

    def test_the_summary_lists_every_setting_with_its_default_and_line(self) -> None:
        rows = self.summary_rows()
        assert set(rows) == {setting.name for setting in SETTINGS}
        for setting in SETTINGS:
            default, short = rows[setting.name]
            assert default.startswith(f"`{self.literal(setting.default)}`"), setting.name
            assert short == setting.doc, setting.name

    def test_the_misspelling_example_shows_the_check_s_own_hint(self) -> None:
        (shown,) = re.findall(r"^\tHINT: (Did you mean 'LEASE_SECONDS'.*)$", self.PAGE, re.M)
        assert shown == unknown_setting("LEASE_SECOND").hint

    def test_every_setting_has_a_section_stating_its_default(self) -> None:
        sections = dict(re.findall(r"^### `(\w+)`\n\nDefault: (.+)$", self.PAGE, re.M))
        assert set(sections) == {setting.name for setting in SETTINGS}
        for setting in SETTINGS:
            assert sections[setting.name].startswith(f"`{self.literal(setting.default)}`")


class TestClockCheck:
    def test_local_wall_clock_times_are_warned_of(self) -> None:
        with override_settings(USE_TZ=False, TIME_ZONE="Europe/Paris"):
            (warning,) = check_clock()
        assert warning.id == "django_sqlqueue.W030"
        assert "daylight saving" in warning.msg and "USE_TZ = True" in warning.hint

    @pytest.mark.parametrize(("use_tz", "zone"), [(True, "Europe/Paris"), (False, "UTC")])
    def test_utc_storage_is_fine(self, use_tz: bool, zone: str) -> None:
        with override_settings(USE_TZ=use_tz, TIME_ZONE=zone):
            assert check_clock() == []
