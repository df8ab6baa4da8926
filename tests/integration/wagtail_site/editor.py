"""What an editor does in Wagtail's admin, through Django's test client: the same requests the
browser sends, handled by Wagtail's own views, signal handlers and tasks.

The actions come in phases. Each phase only enqueues tasks about objects that still exist when
it ends: Wagtail's tasks look their object up by primary key, so a task queued for a page that
the same phase then deletes would fail in any queue (in immediate mode it ran before the
delete). The test drains the queue between phases, as workers that keep up would.
"""

from __future__ import annotations

import io
import re
import uuid
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model
from django.core.files.uploadedfile import SimpleUploadedFile
from django.http import HttpResponse
from django.test import Client
from django.urls import reverse
from PIL import Image as PILImage
from wagtail.documents import get_document_model
from wagtail.images import get_image_model
from wagtail.models import Page
from wagtail.test.utils.form_data import inline_formset, nested_form_data, rich_text, streamfield

from django_sqlqueue.models import Job

from .models import ArticlePage

EDITOR = "editor"


class EditorError(AssertionError):
    """A request did not do what the editor meant: the response says why."""


def _expect(response: HttpResponse, status: int, what: str) -> HttpResponse:
    if response.status_code != status:
        body = response.content.decode(errors="replace")[:3000]
        raise EditorError(f"{what}: HTTP {response.status_code}, expected {status}\n{body}")
    return response


def editor_client() -> Client:
    """A client logged in as the editor (a superuser made on first use)."""
    user_model = get_user_model()
    user = user_model.objects.filter(username=EDITOR).first()
    if user is None:
        user = user_model.objects.create_superuser(EDITOR, "editor@example.com", "unused")
    client = Client()
    client.force_login(user)
    return client


def _png(colour: tuple[int, int, int]) -> bytes:
    buffer = io.BytesIO()
    PILImage.new("RGB", (320, 200), colour).save(buffer, format="PNG")
    return buffer.getvalue()


def _home() -> Page:
    """The page `wagtail`'s migrations create as the site root."""
    return Page.objects.get(depth=2)


def _page(slug: str, parent: Page | None = None) -> ArticlePage:
    pages = ArticlePage.objects.filter(slug=slug)
    if parent is not None:
        pages = pages.child_of(parent)
    return pages.get()


def article_data(title: str, slug: str, links_to: Page | None, *, publish: bool) -> dict[str, Any]:
    """The page form's POST data for an article that refers to the image, the document and
    `links_to` in each way Wagtail indexes: foreign keys, StreamField blocks, rich text."""
    image = get_image_model().objects.get(title="Sunset")
    document = get_document_model().objects.get(title="Annual report")
    page_link = f'<a linktype="page" id="{links_to.pk}">up</a>' if links_to else "home"
    body: list[tuple[str, Any]] = [
        ("paragraph", rich_text(f"<p>{title} starts here, {page_link}.</p>")),
        ("image", str(image.pk)),
        ("document", str(document.pk)),
    ]
    if links_to is not None:
        body.append(("page", str(links_to.pk)))
    stream = streamfield(body)
    for index in range(len(body)):
        # The browser sends each block's id; fixed ones make both runs' content paths equal.
        stream[str(index)]["id"] = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{slug}/{index}"))
    data = nested_form_data(
        {
            "title": title,
            "slug": slug,
            "intro": rich_text(
                f'<p>Read <a linktype="document" id="{document.pk}">the report</a> about '
                f"{title.lower()}.</p>"
                f'<embed embedtype="image" id="{image.pk}" format="left" alt="sunset"/>'
            ),
            "feed_image": str(image.pk),
            "body": stream,
            "related_links": inline_formset(
                [{"label": f"{title} report", "document": str(document.pk)}]
            ),
            "comments": inline_formset([]),
        }
    )
    if publish:
        data["action-publish"] = "action-publish"
    return data


def create_article(
    client: Client, parent: Page, title: str, slug: str, *, publish: bool = True
) -> ArticlePage:
    url = reverse("wagtailadmin_pages:add", args=["wagtail_site", "articlepage", parent.pk])
    _expect(client.get(url), 200, f"open the new-page form under {parent.title}")
    data = article_data(title, slug, parent if parent.depth > 2 else None, publish=publish)
    _expect(client.post(url, data), 302, f"create {title!r}")
    return _page(slug, parent)


def edit_article(client: Client, page: ArticlePage, new_title: str) -> None:
    """Open the editor, change the title and drop the image block, publish."""
    url = reverse("wagtailadmin_pages:edit", args=[page.pk])
    _expect(client.get(url), 200, f"open the editor of {page.title}")
    parent = page.get_parent()
    data = article_data(new_title, page.slug, parent if parent.depth > 2 else None, publish=True)
    data["body-1-deleted"] = "1"
    _expect(client.post(url, data), 302, f"edit {page.title!r}")


def upload_image(client: Client) -> None:
    upload = SimpleUploadedFile("sunset.png", _png((250, 120, 40)), content_type="image/png")
    _expect(
        client.post(reverse("wagtailimages:add"), {"title": "Sunset", "file": upload}),
        302,
        "upload the image",
    )
    # The library lists it with a thumbnail: a rendition file, deleted with the image later.
    _expect(client.get(reverse("wagtailimages:index")), 200, "open the image library")


def upload_document(client: Client) -> None:
    upload = SimpleUploadedFile("report.txt", b"Figures of the year.\n", "text/plain")
    _expect(
        client.post(reverse("wagtaildocs:add"), {"title": "Annual report", "file": upload}),
        302,
        "upload the document",
    )


def phase_author(client: Client) -> None:
    """Upload an image and a document; build a small tree of published pages; edit one."""
    upload_image(client)
    upload_document(client)
    guides = create_article(client, _home(), "Guides", "guides")
    first = create_article(client, guides, "Getting started", "getting-started")
    create_article(client, guides, "Going further", "going-further")
    create_article(client, guides, "Troubleshooting", "troubleshooting")
    create_article(client, guides, "Unfinished notes", "unfinished", publish=False)
    create_article(client, first, "Installing", "installing")
    create_article(client, first, "Configuring", "configuring")
    edit_article(client, first, "First steps")


def phase_restructure(client: Client) -> None:
    """Copy the tree (publishing the copies), unpublish a page, delete the draft."""
    guides = _page("guides")
    _expect(
        client.post(
            reverse("wagtailadmin_pages:copy", args=[guides.pk]),
            {
                "new_title": "Guides (archive)",
                "new_slug": "guides-archive",
                "new_parent_page": str(_home().pk),
                "copy_subpages": "on",
                "publish_copies": "on",
            },
        ),
        302,
        "copy the Guides tree",
    )
    going_further = _page("going-further", guides)
    _expect(
        client.post(reverse("wagtailadmin_pages:unpublish", args=[going_further.pk])),
        302,
        "unpublish Going further",
    )
    unfinished = _page("unfinished", guides)
    _expect(
        client.post(reverse("wagtailadmin_pages:delete", args=[unfinished.pk])),
        302,
        "delete the draft",
    )


def phase_clean_up(client: Client) -> None:
    """Delete a published page with children, the image and the document; edit a copy."""
    guides = _page("guides")
    troubleshooting = _page("troubleshooting", guides)
    _expect(
        client.post(reverse("wagtailadmin_pages:delete", args=[troubleshooting.pk])),
        302,
        "delete Troubleshooting",
    )
    image = get_image_model().objects.get(title="Sunset")
    _expect(client.post(reverse("wagtailimages:delete", args=[image.pk])), 302, "delete the image")
    document = get_document_model().objects.get(title="Annual report")
    _expect(
        client.post(reverse("wagtaildocs:delete", args=[document.pk])),
        302,
        "delete the document",
    )
    archive = _page("guides-archive")
    url = reverse("wagtailadmin_pages:edit", args=[archive.pk])
    _expect(client.get(url), 200, "open the editor of the archive")
    data = nested_form_data(
        {
            "title": "Guides (old)",
            "slug": "guides-archive",
            "intro": rich_text("<p>Kept for reference.</p>"),
            "body": streamfield([]),
            "related_links": inline_formset([]),
            "comments": inline_formset([]),
        }
    )
    data["action-publish"] = "action-publish"
    _expect(client.post(url, data), 302, "edit the archive")


def visit_queue_admin(client: Client) -> None:
    """The queue's pages in the Django admin, which Wagtail mounts at /django-admin/: they
    render, and link to no /admin/ URL (Wagtail's own admin lives there)."""
    job = Job.objects.order_by("pk").first()
    assert job is not None, "the queue holds no job"
    for url in [
        reverse("admin:django_sqlqueue_job_changelist"),
        reverse("admin:django_sqlqueue_job_change", args=[job.pk]),
        reverse("admin:django_sqlqueue_worker_changelist"),
    ]:
        html = _expect(client.get(url), 200, f"open {url}").content.decode()
        wrong = sorted(set(re.findall(r'(?:href|action)="(/admin/django_sqlqueue[^"]*)"', html)))
        if wrong:
            raise EditorError(f"{url} links to Wagtail's /admin/ instead of Django's: {wrong}")


PHASES: dict[str, Callable[[Client], None]] = {
    "author": phase_author,
    "restructure": phase_restructure,
    "clean-up": phase_clean_up,
}
