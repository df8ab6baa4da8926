"""One page: buttons that enqueue the shop's jobs, and the latest jobs with their status.

A real project would put these buttons behind a login; the demo keeps them public.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_GET, require_POST

from django_sqlqueue import Job
from django_sqlqueue.queries import status_summary

from .enqueuers import ENQUEUERS

LATEST = 25


def _admin_url(name: str, *args: Any) -> str | None:
    """The admin page of the jobs, if the app registers its admin."""
    try:
        return reverse(f"admin:django_sqlqueue_job_{name}", args=args)
    except NoReverseMatch:
        return None


def _jobs_context() -> dict[str, Any]:
    latest = list(Job.objects.order_by("-id")[:LATEST])
    for job in latest:
        job.admin_url = _admin_url("change", job.pk)
    return {
        "summary": status_summary(),
        "jobs": latest,
        "changelist_url": _admin_url("changelist"),
    }


@require_GET
def index(request: HttpRequest) -> HttpResponse:
    return render(request, "shop/index.html", _jobs_context())


@require_GET
def jobs_fragment(request: HttpRequest) -> HttpResponse:
    """The summary and table alone, which the page fetches every two seconds."""
    return render(request, "shop/_jobs.html", _jobs_context())


@require_POST
def enqueue(request: HttpRequest, kind: str) -> HttpResponse:
    enqueuer = ENQUEUERS.get(kind)
    if enqueuer is None:
        raise Http404(f"No job kind {kind!r}.")
    jobs = enqueuer()
    ids = ", ".join(f"#{job.pk}" for job in jobs[:3]) + (" …" if len(jobs) > 3 else "")
    messages.success(request, f"Enqueued {len(jobs)} job{'s' if len(jobs) != 1 else ''}: {ids}")
    return redirect("shop:index")
