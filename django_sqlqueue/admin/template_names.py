"""Where the admin looks for its templates, so a project can override them per app or model.

Django's admin looks for `change_list.html` under `admin/<app_label>/<model_name>/`, then
`admin/<app_label>/`, then `admin/`. Our own pages (the confirmations, the purge form, the
attempt history) follow the same order, ending at our template instead of Django's.
"""

from __future__ import annotations

from typing import Any

#: Our templates, by the name a project uses to override them.
DEFAULTS = {
    "change_list.html": "django_sqlqueue/admin/job_change_list.html",
    "change_form.html": "django_sqlqueue/admin/job_change_form.html",
    "confirm_bulk.html": "django_sqlqueue/admin/confirm_bulk.html",
    "confirm_one.html": "django_sqlqueue/admin/confirm_one.html",
    "purge_old.html": "django_sqlqueue/admin/purge_old.html",
    "attempt_history.html": "django_sqlqueue/admin/attempt_history.html",
    "pagination.html": "django_sqlqueue/admin/pagination.html",
    "search_form.html": "django_sqlqueue/admin/search_form.html",
}


def template_names(opts: Any, name: str, default: str | None = None) -> list[str]:
    """`name` for the model `opts` describes, most specific first, then our default (that of
    DEFAULTS unless `default` names another)."""
    return [
        f"admin/{opts.app_label}/{opts.model_name}/{name}",
        f"admin/{opts.app_label}/{name}",
        default or DEFAULTS[name],
    ]


def includes(opts: Any) -> dict[str, list[str]]:
    """The lookup lists of the templates our pages `{% include %}`, for their context."""
    return {
        "pagination": template_names(opts, "pagination.html"),
        "search_form": template_names(opts, "search_form.html"),
    }
