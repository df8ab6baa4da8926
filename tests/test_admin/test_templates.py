"""A project overrides the admin's templates per model or per app, as with Django's admin."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth.models import User
from django.test import Client, override_settings
from django.urls import reverse

from django_sqlqueue.admin.template_names import DEFAULTS
from django_sqlqueue.states import Status

from .helpers import change_url, changelist_url, job_in, operation_url

pytestmark = pytest.mark.django_db

LEVELS = {
    "model": "admin/django_sqlqueue/job/{}",
    "app": "admin/django_sqlqueue/{}",
}


def list_page(client: Client) -> Any:
    job_in(Status.DEAD)
    return client.get(changelist_url())


def job_page(client: Client) -> Any:
    return client.get(change_url(job_in(Status.DEAD)))


def history(client: Client) -> Any:
    return client.get(change_url(job_in(Status.DEAD, history=[{"attempt": 1}])))


def confirm_bulk(client: Client) -> Any:
    job = job_in(Status.DEAD)
    data = {"action": "requeue_selected", ACTION_CHECKBOX_NAME: [str(job.pk)], "index": "0"}
    return client.post(changelist_url(), data)


def confirm_one(client: Client) -> Any:
    return client.get(operation_url(job_in(Status.DEAD), "requeue"))


def purge_old(client: Client) -> Any:
    return client.get(reverse("admin:django_sqlqueue_job_purge_old"))


PAGES: dict[str, Callable[[Client], Any]] = {
    "change_list.html": list_page,
    "change_form.html": job_page,
    "attempt_history.html": history,
    "confirm_bulk.html": confirm_bulk,
    "confirm_one.html": confirm_one,
    "purge_old.html": purge_old,
    "pagination.html": list_page,
    "search_form.html": list_page,
}


def project_templates(tmp_path: Path, files: dict[str, str]) -> Any:
    """Settings with a project template directory holding `files` (path → content)."""
    for name, content in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    engine = {**settings.TEMPLATES[0], "DIRS": [str(tmp_path)]}
    return override_settings(TEMPLATES=[engine])


@pytest.fixture
def admin_client(db: Any) -> Client:
    """A superuser without a password: no slow hashing in each of the many tests here."""
    client = Client()
    client.force_login(User.objects.create_superuser("root", email=None, password=None))
    return client


def page_text(name: str, marker: str) -> str:
    """A whole page extends ours and adds `marker`; an included piece is just `marker`."""
    if name in ("change_list.html", "change_form.html"):
        return f'{{% extends "{DEFAULTS[name]}" %}}{{% block footer %}}{marker}{{% endblock %}}'
    return marker


def test_every_template_has_an_override_test():
    assert set(PAGES) == set(DEFAULTS)


@pytest.mark.parametrize("name", sorted(PAGES))
@pytest.mark.parametrize("level", sorted(LEVELS))
def test_a_project_template_wins(admin_client, tmp_path, name, level):
    """The project's template replaces ours; extending ours keeps the page working."""
    marker = f"<!-- project {level} {name} -->"
    with project_templates(tmp_path, {LEVELS[level].format(name): page_text(name, marker)}):
        response = PAGES[name](admin_client)
        assert response.status_code == 200
        assert marker in response.content.decode()


@pytest.mark.parametrize("name", sorted(PAGES))
def test_the_model_level_beats_the_app_level(admin_client, tmp_path, name):
    files = {LEVELS[level].format(name): page_text(name, f"<!-- {level} -->") for level in LEVELS}
    with project_templates(tmp_path, files):
        content = PAGES[name](admin_client).content.decode()
    assert "<!-- model -->" in content
    assert "<!-- app -->" not in content


@pytest.mark.parametrize("name", sorted(PAGES))
def test_without_a_project_template_ours_is_used(admin_client, name):
    response = PAGES[name](admin_client)
    assert DEFAULTS[name] in [t.name for t in response.templates]
