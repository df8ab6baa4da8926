"""The state Wagtail's tasks maintain, as plain sorted rows that two databases can be compared
by: the reference index, the search index, the frontend-cache purges, the files in storage.
Row ids are left out (the two task modes insert in different orders); content types are named
by app label and model, not id."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from django_sqlqueue.models import Job


def _rows(sql: str) -> list[list[Any]]:
    with connection.cursor() as cursor:
        cursor.execute(sql)
        return sorted([str(value) for value in row] for row in cursor.fetchall())


def _type(column: str) -> str:
    """SQL for the `app_label.model` name of a content type id column."""
    return (
        f"(SELECT ct.app_label || '.' || ct.model FROM django_content_type ct "
        f"WHERE ct.id = {column})"
    )


def reference_index() -> list[list[Any]]:
    return _rows(
        f"SELECT {_type('r.content_type_id')}, {_type('r.base_content_type_id')}, r.object_id, "
        f"{_type('r.to_content_type_id')}, r.to_object_id, r.model_path, r.content_path, "
        f"r.content_path_hash FROM wagtailcore_referenceindex r"
    )


def search_index() -> dict[str, list[list[Any]]]:
    """Wagtail's database search backend: its entries, and SQLite's full-text table.

    Not `title_norm`, a ranking hint: the average title length over the entries that existed
    when the entry was written, so it depends on the order in which objects were indexed.
    """
    entry = "wagtailsearch_indexentry"
    if connection.vendor == "postgresql":
        return {
            entry: _rows(
                f"SELECT {_type('e.content_type_id')}, e.object_id, "
                f"e.title::text, e.body::text, e.autocomplete::text, e.title_text, e.body_text "
                f"FROM {entry} e"
            )
        }
    return {
        entry: _rows(
            f"SELECT {_type('e.content_type_id')}, e.object_id, e.title, e.body, "
            f"e.autocomplete FROM {entry} e"
        ),
        f"{entry}_fts": _rows(
            f"SELECT {_type('e.content_type_id')}, e.object_id, f.title, f.body, f.autocomplete "
            f"FROM {entry}_fts f LEFT JOIN {entry} e ON e.id = f.rowid"
        ),
    }


def purged_urls() -> list[list[Any]]:
    return _rows("SELECT url FROM wagtail_site_purgedurl")


def pages() -> list[list[Any]]:
    """The tree itself, to show that both runs did the same things."""
    return _rows(
        "SELECT id, path, title, slug, live, has_unpublished_changes FROM wagtailcore_page"
    )


def media_files() -> list[str]:
    root = Path(settings.MEDIA_ROOT)
    return sorted(
        str(Path(directory, name).relative_to(root))
        for directory, _, names in os.walk(root)
        for name in names
        if not Path(directory).is_relative_to(root / "static")
    )


def jobs() -> list[list[Any]]:
    """Every job the queue holds: task, status, attempts, each failed attempt's error
    (empty in immediate mode)."""
    return sorted(
        [
            row["name"],
            row["status"],
            row["attempts"],
            [entry["error"] for entry in row["history"] if entry.get("error")],
        ]
        for row in Job.objects.values("name", "status", "attempts", "history")
    )


def snapshot() -> dict[str, Any]:
    return {
        "pages": pages(),
        "reference_index": reference_index(),
        "search_index": search_index(),
        "purged_urls": purged_urls(),
        "media_files": media_files(),
        "jobs": jobs(),
    }
