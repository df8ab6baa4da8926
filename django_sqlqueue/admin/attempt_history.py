"""The attempt history as the job page shows it: numbered across requeues, split into runs.

Each stored entry keeps the `attempt` number the worker gave it, which counts from 1 again
after a requeue (requeue resets `attempts` to 0). Read alone, a history then says 1, 2, 3, 1.
The page numbers the entries itself, one running number over the whole history, and marks
where a requeue started a new run. An entry belongs to a new run when its stored number is
lower than the run so far could give: the next attempt after a spent one has the next number,
and after a released one (handed back unspent) the same number again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from ..attempts import AttemptOutcome
from . import display


@dataclass
class Run:
    """Attempts between two requeues (the first run starts with the job)."""

    number: int
    entries: list[dict[str, Any]] = field(default_factory=list)

    @property
    def spent(self) -> int:
        return sum(1 for e in self.entries if e.get("outcome") != AttemptOutcome.RELEASED.value)


def stored_number(raw: dict[str, Any]) -> int | None:
    value = raw.get("attempt")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def starts_new_run(raw: dict[str, Any], previous: dict[str, Any] | None) -> bool:
    """True when `raw`'s stored attempt number restarts the count after `previous`."""
    number, before = stored_number(raw), stored_number(previous or {})
    if previous is None or number is None or before is None:
        return False
    released = previous.get("outcome") == AttemptOutcome.RELEASED.value
    expected = before if released else before + 1
    return number < expected


def outcome_css(outcome: str) -> str:
    if outcome == AttemptOutcome.COMPLETED.value:
        return "completed"
    if outcome in (AttemptOutcome.RELEASED.value, "cancelled"):
        return "cancelled"
    return "dead" if outcome == AttemptOutcome.LOST.value else "failed"


def entry_row(raw: dict[str, Any], number: int, run: int) -> dict[str, Any]:
    started = display.parse_moment(raw.get("started_at"))
    finished = display.parse_moment(raw.get("finished_at"))
    elapsed = display.timedelta_between(started, finished)
    outcome = str(raw.get("outcome") or "")
    stored = raw.get("attempt", "?")
    return {
        "number": number,
        "run": run,
        "stored_attempt": stored,
        "number_title": _("attempt %(attempt)s of run %(run)s") % {"attempt": stored, "run": run},
        "worker": raw.get("worker") or "",
        "started": display.compact_moment(started),
        "finished_title": display.full_time(finished) if finished else "",
        "duration": display.human_seconds(elapsed.total_seconds() if elapsed else None),
        "outcome": outcome,
        "outcome_badge": display.badge(
            display.outcome_label(outcome) if outcome else "?", outcome_css(outcome)
        ),
        "error": raw.get("error") or "",
        "traceback": raw.get("traceback") or "",
    }


def history_rows(history: Any) -> list[dict[str, Any]]:
    """One row per entry, numbered 1..n, and a `new_run` row before each requeue's run.

    Entries the page cannot read (not a dict) are shown raw and keep their place.
    """
    rows: list[dict[str, Any]] = []
    run, previous = 1, None
    for number, raw in enumerate(history or [], start=1):
        if not isinstance(raw, dict):
            rows.append({"number": number, "raw": display.pretty_json(raw)})
            continue
        if starts_new_run(raw, previous):
            run += 1
            rows.append({"new_run": run, "after": number - 1})
        rows.append(entry_row(raw, number, run))
        previous = raw
    return rows


def runs_of(history: Any) -> list[Run]:
    """The history's entries grouped by run, oldest first."""
    runs = [Run(1)]
    previous = None
    for raw in history or []:
        if not isinstance(raw, dict):
            continue
        if starts_new_run(raw, previous):
            runs.append(Run(len(runs) + 1))
        runs[-1].entries.append(raw)
        previous = raw
    return runs


def attempts_summary(attempts: int, max_attempts: int, history: Any) -> SafeString | str:
    """`2 / 5`, and how many attempts in all when requeues started more than one run."""
    current = _("%(attempts)d / %(max)d") % {"attempts": attempts, "max": max_attempts}
    runs = runs_of(history)
    if len(runs) < 2:
        return current
    total = sum(run.spent for run in runs)
    in_all = ngettext("%(count)d attempt in all", "%(count)d attempts in all", total) % {
        "count": total
    }
    over = ngettext("%(count)d run", "%(count)d runs", len(runs)) % {"count": len(runs)}
    return format_html(
        '{} <span class="sq-quiet">{}</span>',
        current,
        _("(%(attempts)s, over %(runs)s)") % {"attempts": in_all, "runs": over},
    )
