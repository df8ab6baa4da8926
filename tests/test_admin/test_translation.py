"""Every word the admin shows goes through translation.

A pseudo-language ("xx") whose catalog turns each translated string's ASCII letters into
full-width ones (U+FF21 onwards: `Requeue` reads the same, in wide letters), leaving
placeholders and HTML tags alone. With it active, every page of the admin is rendered and its
visible text (and the attributes a user reads: title, value, placeholder, alt, aria-label) is
searched for ASCII letters. After removing the data the test put in the database, any ASCII
letter left is a string that did not go through gettext, whether in our code, our templates
or a model label.
"""

from __future__ import annotations

import gettext as gettext_module
import re
from collections.abc import Iterator
from datetime import timedelta
from html.parser import HTMLParser
from typing import Any

import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import trans_real

from django_sqlqueue.admin import display
from django_sqlqueue.admin.actions import OPERATIONS, ActionReport
from django_sqlqueue.admin.changelist import count_text
from django_sqlqueue.admin.counting import AT_LEAST, ESTIMATE, EXACT
from django_sqlqueue.conf import get_settings
from django_sqlqueue.models import Job, Worker
from django_sqlqueue.registry import registry
from django_sqlqueue.states import Status

from .helpers import attempt_history, change_url, changelist_url, job_in, operation_url

pytestmark = pytest.mark.django_db

PSEUDO = "xx"
FULL_WIDTH = {
    c: chr(ord(c) + 0xFEE0) for c in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
}
# %(name)s, %s, %d, %02d, %.2f, {name}, an HTML tag or an entity: kept as they are.
KEEP = re.compile(r"%(?:\([^)]*\))?[-#0 +]*\d*(?:\.\d+)?[a-zA-Z%]|\{[^}]*\}|<[^>]*>|&\w+;")


def pseudo(message: str) -> str:
    """`message` with its letters made full-width, outside placeholders and tags."""
    out, last = [], 0
    for kept in KEEP.finditer(message):
        out.append("".join(FULL_WIDTH.get(c, c) for c in message[last : kept.start()]))
        out.append(kept.group())
        last = kept.end()
    out.append("".join(FULL_WIDTH.get(c, c) for c in message[last:]))
    return "".join(out)


class PseudoTranslation(gettext_module.NullTranslations):
    """A catalog that translates every message, as a complete translation would."""

    def gettext(self, message: str) -> str:
        # pgettext asks for "context\x04message" and expects the message back translated.
        return pseudo(message.split("\x04", 1)[-1])

    def ngettext(self, singular: str, plural: str, n: int) -> str:
        return self.gettext(singular if n == 1 else plural)

    def to_language(self) -> str:
        return PSEUDO


@pytest.fixture
def pseudo_language() -> Iterator[None]:
    trans_real._translations[PSEUDO] = PseudoTranslation()
    try:
        with translation.override(PSEUDO):
            yield
    finally:
        trans_real._translations.pop(PSEUDO, None)


class VisibleText(HTMLParser):
    """The text a user sees or hovers over, outside <script> and <style>."""

    ATTRIBUTES = ("title", "placeholder", "alt", "aria-label")

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style", "template"):
            self.hidden += 1
        values = dict(attrs)
        for name in self.ATTRIBUTES:
            if values.get(name):
                self.parts.append(values[name] or "")
        if tag == "input" and values.get("type") in ("submit", "button") and values.get("value"):
            self.parts.append(values["value"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "template"):
            self.hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.parts.append(data)


def untranslated(html: str, data: list[str]) -> list[str]:
    """Runs of text with ASCII letters that are neither translated nor the test's data."""
    parser = VisibleText()
    parser.feed(html)
    found = []
    for part in parser.parts:
        for value in sorted(data, key=len, reverse=True):
            part = part.replace(value, " ")
        found.extend(m.strip() for m in re.findall(r"[^\s]*[A-Za-z][^\s]*", part))
    return sorted(set(found))


# Data: every value the pages show from the database is made of these tokens, so the test
# can tell data from text; each must survive translation unchanged.
NAME, QUEUE, WORKER, HOST, USER = "zq.zqalpha", "zqq", "zqhost:1:zqw0", "zqhost", "zqstaff"
ERROR = "ZqError: zqboom"


@pytest.fixture
def staff(db: Any) -> Client:
    user = User.objects.create_superuser(USER, email=None, password=None)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def jobs() -> dict[str, Job]:
    now = timezone.now()
    history = attempt_history(
        ((1, "error"), (2, "lost"), (1, "released"), (1, "timeout")), worker=WORKER, error=ERROR
    )
    common = {"name": NAME, "queue": QUEUE, "last_error": ERROR}
    made = {status.value: job_in(status.value, **common, lease_owner=WORKER) for status in Status}
    made["dead"].history = history
    made["dead"].idempotency_key = "zqkey"
    made["dead"].priority = 3
    made["dead"].result = 7
    made["dead"].created_at = now - timedelta(days=40)  # a date with a month name
    made["dead"].save()
    made["failed"].run_at = now + timedelta(minutes=5)
    made["failed"].save()
    made["running"].lease_expires_at = now - timedelta(seconds=5)  # expired
    made["running"].save()
    Worker.objects.create(
        id=WORKER, hostname=HOST, pid=1, queues=QUEUE, current_job_id=made["running"].pk
    )
    Worker.objects.create(
        id="zqhost:2:zqw1", hostname=HOST, pid=2, last_seen_at=now - timedelta(hours=1)
    )
    return made


def data_of(jobs: dict[str, Job]) -> list[str]:
    values = [NAME, QUEUE, WORKER, HOST, USER, ERROR, "zqhost:2:zqw1", "zqkey", "zqboom"]
    values += NAME.split(".")  # the list may break a name after its dots
    # The filters also offer the registered job names and the default queue.
    values += [*registry.names(), get_settings().default_queue]
    # Job.__str__ (name #id (status)), in the titles and the object history.
    values += [f"{NAME} #{job.pk} ({s.value})" for job in jobs.values() for s in Status]
    # The detail page's reference (the id alone, for rows made without a nonce, is a number).
    values += [job.reference for job in jobs.values() if job.ref_nonce is not None]
    return values


def bulk(client: Client, action: str, job: Job, **extra: str) -> Any:
    data = {"action": action, ACTION_CHECKBOX_NAME: [str(job.pk)], "index": "0", **extra}
    return client.post(changelist_url(), data, follow=True)


def pages(client: Client, jobs: dict[str, Job]) -> Iterator[tuple[str, str]]:
    """(what, html) of every page the admin has, in the states that change their text."""
    purge_old = reverse("admin:django_sqlqueue_job_purge_old")
    workers = reverse("admin:django_sqlqueue_worker_changelist")
    gets = {
        "job list": changelist_url(),
        "job list, filtered": changelist_url() + "?status__exact=dead&stuck=yes",
        "worker list": workers,
        "worker page": reverse("admin:django_sqlqueue_worker_change", args=[WORKER]),
        "purge form": purge_old,
        "job history": reverse("admin:django_sqlqueue_job_history", args=[jobs["dead"].pk]),
    }
    for status, job in jobs.items():
        gets[f"{status} job page"] = change_url(job)
        for key in OPERATIONS:
            gets[f"{key} {status} job"] = operation_url(job, key)
    for what, url in gets.items():
        response = client.get(url)
        assert response.status_code == 200, (what, response.status_code)
        yield what, response.content.decode()
    for key in OPERATIONS:
        for status in ("pending", "running", "dead"):
            yield (
                f"confirm {key} of {status}",
                bulk(client, f"{key}_selected", jobs[status]).content.decode(),
            )
    statuses = ["completed", "dead", "cancelled"]
    counted = client.post(purge_old, {"days": "0", "statuses": statuses, "queue": QUEUE})
    yield "purge count", counted.content.decode()
    # After acting: the message on the list, then the job page's history entry.
    done = client.post(operation_url(jobs["dead"], "requeue"), {"confirmed": "yes"}, follow=True)
    yield "message after requeue", done.content.decode()
    history = client.get(reverse("admin:django_sqlqueue_job_history", args=[jobs["dead"].pk]))
    yield "history after requeue", history.content.decode()
    mixed = bulk(client, "cancel_selected", jobs["running"], confirmed="yes")
    yield "message after a refused cancel", mixed.content.decode()
    purged = client.post(purge_old, {"days": "0", "statuses": statuses, "confirmed": "yes"})
    yield "message after purge", client.get(purged["Location"]).content.decode()


#: Django's own admin/search_form.html (the workers list uses it) has an untranslated
#: `alt="Search"`; the job list has its own search form.
DJANGO_GAPS = {"worker list": ["Search"]}


def test_every_admin_page_is_translated(staff, jobs, pseudo_language):
    data = data_of(jobs)
    problems = {}
    for what, html in pages(staff, jobs):
        assert pseudo("job") in html.lower(), what  # the pseudo-language is active
        left = untranslated(html, data + DJANGO_GAPS.get(what, []))
        if left:
            problems[what] = left
    assert problems == {}, "\n".join(f"{k}: {v}" for k, v in problems.items())


def test_the_check_finds_an_untranslated_word(staff, jobs, pseudo_language):
    """The test above can fail: an English word on the page is found."""
    html = staff.get(changelist_url()).content.decode()
    assert untranslated(html, data_of(jobs)) == []
    assert untranslated(html.replace("</h1>", " Requeued</h1>", 1), data_of(jobs)) == ["Requeued"]


def test_messages_counts_and_times_use_plural_forms(pseudo_language):
    from collections import Counter

    report = ActionReport(OPERATIONS["cancel"], changed=1, seen=Counter(pending=1, running=2))
    assert untranslated(report.message(), []) == []
    for kind in (EXACT, ESTIMATE, AT_LEAST):
        for count in (1, 12_000):
            assert untranslated(count_text(kind, count), []) == []
    for seconds in (0.0004, 0.004, 0.5, 42, 200, 4000, 400_000):
        assert untranslated(display.human_seconds(seconds), []) == []


def test_english_plural_forms(db):
    from collections import Counter

    one = ActionReport(OPERATIONS["requeue"], changed=1, seen=Counter(dead=1))
    assert one.message() == "Requeued 1 job."
    report = ActionReport(OPERATIONS["requeue"], changed=2, seen=Counter(dead=2, running=1))
    assert report.message().startswith(
        "Requeued 2 of 3 selected jobs. Skipped 1 job whose status does not allow it"
    )
    assert count_text(EXACT, 1) == "1 job"
    assert count_text(ESTIMATE, 1_000_000) == "about 1,000,000 jobs"
