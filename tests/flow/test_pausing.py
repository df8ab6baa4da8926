"""Pause and resume queues: the API, the claim, `manage.py queues` and the admin page."""

from __future__ import annotations

import io
import json
import re

import pytest
from django.core.management import CommandError, call_command
from django.db import connections, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import django_sqlqueue
from django_sqlqueue import operations
from django_sqlqueue.databases import queue_database
from django_sqlqueue.exceptions import InvalidJobError
from django_sqlqueue.models import QueueState
from tests.test_admin.helpers import staff_client
from tests.testapp.jobs import noop

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip()


def fresh_claimer(alias: str):
    """A claimer with no cached reading of the paused queues."""
    return queue_database(alias).claimer()


def test_pause_and_resume_say_whether_they_changed_anything():
    assert django_sqlqueue.pause_queue("mail", reason="provider down") is True
    assert django_sqlqueue.pause_queue("mail") is False
    state = QueueState.objects.get(queue="mail")
    assert state.is_paused and state.reason == "provider down"
    assert django_sqlqueue.resume_queue("mail") is True
    assert django_sqlqueue.resume_queue("mail") is False
    assert not QueueState.objects.get(queue="mail").is_paused
    assert django_sqlqueue.resume_queue("never-paused") is False


def test_a_bad_queue_name_is_refused():
    with pytest.raises(InvalidJobError, match="comma"):
        django_sqlqueue.pause_queue("a,b")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("note", "message"),
    [
        ({"reason": "x" * 300}, "reason is 300 characters long; the limit is 255."),
        ({"by": "ops\x00bot"}, "by cannot be stored: a string containing a NUL character"),
        ({"reason": "\ud800"}, "reason cannot be stored: a string that is not valid UTF-8"),
        ({"by": 7}, "by must be a string, got int."),
    ],
)
def test_a_note_the_column_cannot_hold_is_refused_before_any_write(alias, note, message):
    from tests.testapp.models import Order

    with transaction.atomic(using=alias):
        Order.objects.using(alias).create(reference="before")
        with pytest.raises(ValueError, match=re.escape(message)):
            operations.pause_queue("mail", using=alias, **note)
        Order.objects.using(alias).create(reference="after")  # the transaction is usable
    assert Order.objects.using(alias).count() == 2
    assert not QueueState.objects.using(alias).exists()


def test_the_queues_command_refuses_a_long_reason_with_a_command_error():
    with pytest.raises(CommandError, match="reason is 256 characters long; the limit is 255"):
        run("queues", "pause", "mail", "--reason", "r" * 256)
    assert not QueueState.objects.exists()


def test_the_admin_refuses_a_nul_in_the_reason_with_a_message():
    client = staff_client("queues-nul", "view_queuestate", "change_queuestate")
    url = "/admin/django_sqlqueue/queuestate/"
    response = client.post(
        url, {"queue": "mail", "action": "pause", "reason": "down\x00"}, follow=True
    )
    assert response.status_code == 200
    assert b"reason cannot be stored: a string containing a nul" in response.content.lower()
    assert not QueueState.objects.exists()


def test_a_long_staff_name_still_pauses_from_the_admin():
    client = staff_client("s" * 150, "view_queuestate", "change_queuestate")
    url = "/admin/django_sqlqueue/queuestate/"
    client.post(url, {"queue": "mail", "action": "pause", "reason": "down"})
    state = QueueState.objects.get(queue="mail")
    assert state.is_paused and state.paused_by.endswith(" (admin)")
    assert len(state.paused_by) == 150


@pytest.mark.parametrize("named", [True, False])
def test_claims_skip_a_paused_queue_and_take_the_others(alias, named):
    mail = noop.using(queue="mail").enqueue()
    other = noop.using(queue="default").enqueue()
    django_sqlqueue.pause_queue("mail")
    queues = ["mail", "default"] if named else None
    claimed = fresh_claimer(alias).claim("w", queues, 10, 60, timezone.now())
    assert [job.id for job in claimed] == [other.id]
    # Only the paused queue named: no statement at all.
    with CaptureQueriesContext(connections[alias]) as queries:
        claimer = fresh_claimer(alias)
        claimer.paused.current()
        count = len(queries)
        assert claimer.claim("w", ["mail"], 10, 60, timezone.now()) == []
        assert len(queries) == count
    django_sqlqueue.resume_queue("mail")
    claimed = fresh_claimer(alias).claim("w", queues, 10, 60, timezone.now())
    assert [job.id for job in claimed] == [mail.id]


def test_with_nothing_paused_the_claim_is_the_same_statement(alias):
    """The paused names are read once a second; the claim itself does not change."""
    noop.enqueue()
    claimer = fresh_claimer(alias)
    with CaptureQueriesContext(connections[alias]) as first:
        claimer.claim("w", None, 1, 60, timezone.now())
    noop.enqueue()
    with CaptureQueriesContext(connections[alias]) as second:
        claimer.claim("w", None, 1, 60, timezone.now())
    # The first claim read the (empty) paused set; the second, within the second, did not.
    assert len(first) == len(second) + 1
    assert "queuestate" in first[0]["sql"].lower()
    assert all("queuestate" not in q["sql"].lower() for q in second)
    assert all("NOT IN" not in q["sql"] for q in second)


def test_the_paused_set_is_read_again_after_a_second(alias):
    claimer = fresh_claimer(alias)
    assert claimer.paused.current() == frozenset()
    django_sqlqueue.pause_queue("mail")
    assert claimer.paused.current() == frozenset()  # cached
    claimer.paused.read_at -= 1.0
    assert claimer.paused.current() == {"mail"}


def test_queues_command_lists_pauses_and_resumes():
    noop.using(queue="mail").enqueue()
    noop.using(queue="default").enqueue()
    assert run("queues", "pause", "mail", "--reason", "provider down") == "Paused queue 'mail'."
    assert run("queues", "pause", "mail") == "Queue 'mail' was paused."
    lines = run("queues", "list").splitlines()
    assert lines[0] == "default: active; pending: 1"
    assert lines[1].startswith("mail: PAUSED since ")
    assert "(provider down)" in lines[1] and lines[1].endswith("; pending: 1")
    listed = json.loads(run("queues", "list", "--json"))["queues"]
    assert [(q["queue"], q["paused"]) for q in listed] == [("default", False), ("mail", True)]
    assert run("queues", "resume", "mail") == "Resumed queue 'mail'."
    assert run("queues", "resume", "mail") == "Queue 'mail' was not paused."
    with pytest.raises(CommandError, match="comma"):
        run("queues", "pause", "a,b")


def test_admin_page_lists_queues_and_pauses_and_resumes():
    noop.using(queue="mail").enqueue()
    client = staff_client("queues-admin", "view_queuestate", "change_queuestate")
    url = "/admin/django_sqlqueue/queuestate/"
    page = client.get(url)
    assert page.status_code == 200
    assert b"mail" in page.content and b"Active" in page.content
    response = client.post(url, {"queue": "mail", "action": "pause", "reason": "down"})
    assert response.status_code == 302
    state = QueueState.objects.get(queue="mail")
    assert state.is_paused and state.reason == "down" and "queues-admin" in state.paused_by
    assert b"Paused" in client.get(url).content
    client.post(url, {"queue": "mail", "action": "resume"})
    assert not QueueState.objects.get(queue="mail").is_paused


def test_admin_viewer_cannot_pause():
    client = staff_client("queues-viewer", "view_queuestate")
    url = "/admin/django_sqlqueue/queuestate/"
    assert client.get(url).status_code == 200
    assert client.post(url, {"queue": "mail", "action": "pause"}).status_code == 403
    assert not QueueState.objects.filter(queue="mail").exists()
