"""The table of errors at enqueue time in docs/jobs.md says what users get: each row's call is
made here against a `send_email(to, subject, body)` job and must raise that very message."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User

import django_sqlqueue
from django_sqlqueue.models import Job

pytestmark = pytest.mark.django_db

DOC = Path(__file__).resolve().parent.parent / "docs" / "jobs.md"
ROW = re.compile(
    r"^\| `+ ?(?P<call>.+?) ?`+(?P<more> …)? \| `+ ?(?P<error>\w+): (?P<message>.+?) ?`+ \|$"
)


def documented_errors() -> list[tuple[str, str, str]]:
    text = DOC.read_text()
    section = text.split("### Errors at enqueue time", 1)[1].split("\n## ", 1)[0]
    rows = [ROW.match(line) for line in section.splitlines() if line.startswith("| `")]
    # "send_email.using(...) …": the options are checked when the job is enqueued.
    enqueued = ".enqueue(to='a@x', subject='', body='')"
    return [
        (row["call"] + (enqueued if row["more"] else ""), row["error"], row["message"])
        for row in rows
        if row
    ]


def send_email(to, subject="", body=""):  # type: ignore[no-untyped-def]
    """The job the table's rows call, as the docs' project declares it."""


send_email.__module__ = "shop.jobs"


@pytest.fixture
def namespace(register_job: Any) -> dict[str, Any]:
    handler = register_job("send_email", send_email)
    return {
        "send_email": handler,
        "enqueue": django_sqlqueue.enqueue,
        "request": type("Request", (), {"user": User(username="ada")})(),
        "date": date,
        "datetime": datetime,
        "timedelta": timedelta,
        "Decimal": Decimal,
        "UTC": UTC,
    }


ERRORS = documented_errors()


def test_the_table_is_read() -> None:
    assert len(ERRORS) >= 20


@pytest.mark.parametrize(("call", "error", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_each_documented_error_is_what_the_call_raises(
    namespace: dict[str, Any], alias: str, call: str, error: str, message: str
) -> None:
    expected = getattr(django_sqlqueue, error)
    with pytest.raises(expected) as caught:
        eval(call, namespace)  # the docs' own examples
    got = str(caught.value)
    if message.endswith("…"):  # the rest depends on the project
        assert got.startswith(message.removesuffix("…").rstrip()), got
    else:
        assert got == message
    assert not Job.objects.using(alias).exists()
