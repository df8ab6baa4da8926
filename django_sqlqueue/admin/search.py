"""What the job list's search box matches.

A number (in ASCII digits) is a job id, and `4711-3f9a…` a job reference (references.py):
looking either up by primary key is instant on any table, whereas text in the arguments can
only be found by reading every row. Quote a number to search the arguments for it.
"""

from __future__ import annotations

from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from ..models import reference_q
from ..references import parse_reference

HELP_TEXT = _(
    "A job id (1234) or reference (1234-5e0f…), an idempotency key, a job name or part of "
    "one, or text in the arguments. "
    'Put a number in quotes ("4711") to find it in the arguments. Text searches read every job: '
    "narrow the list with filters first on a large table."
)
MAX_ID = 2**63 - 1
#: Longest term searched: longer ones match nothing. SQLite refuses a LIKE pattern past 50,000
#: bytes (this many characters stay under it, at 4 bytes each), and no name, key or argument
#: text worth finding is longer.
MAX_TERM_LENGTH = 10_000


def too_long(term: str) -> bool:
    return len(term.strip()) > MAX_TERM_LENGTH


def search_q(term: str) -> Q | None:
    """The condition for `term`, or None when there is nothing to search for."""
    term = term.strip()
    if not term:
        return None
    if len(term) > MAX_TERM_LENGTH:
        return Q(pk__in=[])
    if len(term) >= 2 and term[0] == term[-1] == '"':
        text = term[1:-1]
        return Q(args__icontains=text) | Q(kwargs__icontains=text) if text else None
    digits = term.removeprefix("#")
    # ASCII digits only: `int()` refuses superscripts ("²" is a digit to `isdigit()`) and more
    # than 4,300 digits with ValueError; such terms, and other scripts' digits, are text.
    if digits.isascii() and digits.isdigit() and len(digits) <= 19 and int(digits) <= MAX_ID:
        return Q(pk=int(digits)) | Q(idempotency_key=term)
    reference = parse_reference(term)
    if reference is not None and reference.nonce is not None:
        return reference_q(reference) | Q(idempotency_key=term)
    return (
        Q(name__icontains=term)
        | Q(idempotency_key=term)
        | Q(args__icontains=term)
        | Q(kwargs__icontains=term)
    )
