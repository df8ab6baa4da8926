"""Row counts the job list can afford on a table of millions of rows.

An exact `COUNT(*)` reads every matching row on every page view. The list instead counts at
most `COUNT_CAP + 1` rows (bounded work whatever the table holds) and, when that is not enough
and nothing is filtered, asks the database for its own estimate of the table's size.
"""

from __future__ import annotations

from typing import Any

from django.core.paginator import Page, Paginator
from django.db.models import Model, QuerySet
from django.utils.functional import cached_property

from ..databases import queue_database
from ..queries import COUNT_CAP, bounded_count

EXACT = "exact"
ESTIMATE = "estimate"
AT_LEAST = "at_least"


def estimated_table_rows(model: type[Model], alias: str) -> int | None:
    """The database's own estimate of the table's row count, or None where it has none."""
    return queue_database(alias).estimated_rows(model._meta.db_table)


class JobPaginator(Paginator):
    """A paginator whose count is exact up to COUNT_CAP, estimated or capped beyond it.

    `count_kind` says which: EXACT, ESTIMATE (unfiltered, from the database's statistics) or
    AT_LEAST (filtered and more than COUNT_CAP: pages stop at the cap; narrow the filters).

    On the first page it reads the page's rows (and one more) before counting: when they are
    all there is, as for most searches, that one read is the count, the page and (see
    JobChangeList) the summary bar, instead of three passes over the table.
    """

    cap = COUNT_CAP
    count_kind = EXACT

    def __init__(
        self,
        queryset: QuerySet[Any],
        per_page: int,
        orphans: int = 0,
        allow_empty_first_page: bool = True,
        *,
        first_page: bool = False,
    ) -> None:
        super().__init__(queryset, per_page, orphans, allow_empty_first_page)
        self.queryset = queryset
        self.first_page = first_page
        self.first_rows: list[Any] | None = None

    @cached_property
    def count(self) -> int:
        queryset = self.queryset
        if self.first_page:
            self.first_rows = list(queryset[: self.per_page + 1])
            if len(self.first_rows) <= self.per_page:
                self.count_kind = EXACT
                return len(self.first_rows)
            del self.first_rows[self.per_page :]
        counted = bounded_count(queryset, self.cap)
        if counted <= self.cap:
            self.count_kind = EXACT
            return counted
        if not queryset.query.where:
            estimate = estimated_table_rows(queryset.model, queryset.db)
            if estimate is not None and estimate > self.cap:
                self.count_kind = ESTIMATE
                return estimate
        self.count_kind = AT_LEAST
        return self.cap

    @property
    def complete(self) -> bool:
        """True when the first page's rows are every matching row."""
        return (
            self.first_rows is not None
            and self.count_kind == EXACT
            and (self.count == len(self.first_rows))
        )

    def page(self, number: int | str) -> Page[Any]:
        number = self.validate_number(number)
        if number == 1 and self.first_rows is not None:
            return Page(self.first_rows, number, self)
        return super().page(number)
