"""What `@job(unique=…, concurrency=…, rate_limit=…)` declared, checked when the decorator
runs, and the keys it gives each enqueued job. Pure: no database, importable before Django's
app registry is ready."""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from ..exceptions import InvalidJobError

#: "100/m": starts per second, minute or hour.
RATE_PATTERN = re.compile(r"^\s*(\d+)\s*/\s*(s|m|h)\s*$")
RATE_PERIODS = {"s": 1.0, "m": 60.0, "h": 3600.0}
#: Longest concurrency key stored (the column's length).
MAX_CONCURRENCY_KEY = 200


@dataclass(frozen=True)
class RateLimit:
    """At most `limit` starts in any `period` seconds."""

    limit: int
    period: float
    text: str


def parse_rate(value: Any, where: str) -> RateLimit:
    """ "N/s", "N/m" or "N/h" with N ≥ 1; InvalidJobError naming `where` otherwise."""
    match = RATE_PATTERN.match(value) if isinstance(value, str) else None
    if match is None or int(match.group(1)) < 1:
        raise InvalidJobError(
            f"{where}: rate_limit must be a string like '100/m' (N starts per second 's', "
            f"minute 'm' or hour 'h', N at least 1), got {value!r}."
        )
    return RateLimit(int(match.group(1)), RATE_PERIODS[match.group(2)], value.strip())


@dataclass(frozen=True)
class FlowSpec:
    """One handler's flow-control options (None/False: not used)."""

    name: str
    unique: bool = False
    unique_for: timedelta | None = None
    unique_by: tuple[str, ...] | None = None
    concurrency: int | None = None
    concurrency_key: str | Callable[..., Any] | None = None
    rate_limit: RateLimit | None = None
    #: The handler's signature (its context parameter removed), to name positional arguments.
    signature: inspect.Signature | None = None

    @property
    def is_unique(self) -> bool:
        return self.unique or self.unique_for is not None

    @property
    def gated(self) -> bool:
        """True if a worker must check this job's limits before it starts it."""
        return self.concurrency is not None or self.rate_limit is not None

    def named_arguments(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        if not args or self.signature is None:
            return dict(kwargs)
        try:
            bound = self.signature.bind_partial(*args, **kwargs)
        except TypeError:
            return {**{str(i): a for i, a in enumerate(args)}, **kwargs}
        return dict(bound.arguments)

    def unique_key(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        """A digest of the job name and its (selected) arguments."""
        if self.unique_by is None:
            compared: Any = [list(args), dict(kwargs)]
        else:
            named = self.named_arguments(args, kwargs)
            compared = {name: named.get(name) for name in self.unique_by}
        text = json.dumps([self.name, compared], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def key_for_concurrency(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
        if self.concurrency is None:
            return None
        template = self.concurrency_key
        if template is None:
            return self.name
        if callable(template):
            value = template(*args, **kwargs)
            if not isinstance(value, str) or not value:
                raise InvalidJobError(
                    f"Job {self.name!r}: concurrency_key returned {value!r}; it must return a "
                    "non-empty string."
                )
        else:
            named = self.named_arguments(args, kwargs)
            try:
                value = template.format_map(named)
            except (KeyError, IndexError) as exc:
                raise InvalidJobError(
                    f"Job {self.name!r}: concurrency_key {template!r} needs the argument "
                    f"{exc.args[0]!r}, which this enqueue did not pass; pass it, or change "
                    "the key."
                ) from None
        if len(value) > MAX_CONCURRENCY_KEY:
            raise InvalidJobError(
                f"Job {self.name!r}: concurrency key {value[:40]!r}… is longer than "
                f"{MAX_CONCURRENCY_KEY} characters; use shorter arguments in concurrency_key."
            )
        return value


class GatedJobs:
    """The registered handlers that have a concurrency or rate limit, by job name: what a
    claimer's gate reads (the registry fills it), with a version bumped on every change."""

    def __init__(self) -> None:
        self.specs: dict[str, FlowSpec] = {}
        self.version = 0

    def set(self, name: str, spec: FlowSpec | None) -> None:
        if spec is not None and spec.gated:
            self.specs[name] = spec
        else:
            self.specs.pop(name, None)
        self.version += 1


GATED = GatedJobs()


def build_spec(
    name: str,
    func: Callable[..., Any],
    *,
    takes_context: bool,
    unique: Any = False,
    unique_for: Any = None,
    unique_by: Any = None,
    concurrency: Any = None,
    concurrency_key: Any = None,
    rate_limit: Any = None,
) -> FlowSpec | None:
    """The handler's FlowSpec (None when no option is used); InvalidJobError on bad input."""
    where = f"@job({name!r})"
    if not isinstance(unique, bool):
        raise InvalidJobError(f"{where}: unique must be True or False, got {unique!r}.")
    if unique_for is not None:
        if isinstance(unique_for, (int, float)) and not isinstance(unique_for, bool):
            unique_for = timedelta(seconds=unique_for)
        if not isinstance(unique_for, timedelta) or unique_for <= timedelta(0):
            raise InvalidJobError(
                f"{where}: unique_for must be a positive timedelta (or seconds), "
                f"got {unique_for!r}."
            )
    signature = _signature(func, takes_context)
    parameters = _parameter_names(signature)
    if unique_by is not None:
        if isinstance(unique_by, str):
            unique_by = (unique_by,)
        unique_by = tuple(unique_by)
        if not unique_by or not all(isinstance(n, str) for n in unique_by):
            raise InvalidJobError(
                f"{where}: unique_by must name the arguments to compare, such as "
                f"('user_id',); got {unique_by!r}."
            )
        if not (unique or unique_for):
            raise InvalidJobError(
                f"{where}: unique_by only says which arguments make jobs the same; add "
                "unique=True or unique_for=."
            )
        unknown = [n for n in unique_by if parameters is not None and n not in parameters]
        if unknown:
            raise InvalidJobError(
                f"{where}: unique_by names {', '.join(map(repr, unknown))}, which the "
                f"function does not take; its arguments are {', '.join(sorted(parameters or ()))}."
            )
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise InvalidJobError(
            f"{where}: concurrency must be a whole number of jobs, at least 1, got {concurrency!r}."
        )
    if concurrency_key is not None:
        if concurrency is None:
            raise InvalidJobError(
                f"{where}: concurrency_key needs concurrency=N, the number of jobs with one key "
                "that may run at once."
            )
        if isinstance(concurrency_key, str):
            _check_template(where, concurrency_key, parameters)
        elif not callable(concurrency_key):
            raise InvalidJobError(
                f"{where}: concurrency_key must be a format string over the job's arguments, "
                f"such as 'account:{{account_id}}', or a callable; got {concurrency_key!r}."
            )
    rate = parse_rate(rate_limit, where) if rate_limit is not None else None
    if not (unique or unique_for or concurrency or rate):
        return None
    return FlowSpec(
        name=name,
        unique=unique,
        unique_for=unique_for,
        unique_by=unique_by,
        concurrency=concurrency,
        concurrency_key=concurrency_key,
        rate_limit=rate,
        signature=signature,
    )


def _signature(func: Callable[..., Any], takes_context: bool) -> inspect.Signature | None:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    if takes_context:
        params = list(signature.parameters.values())[1:]
        signature = signature.replace(parameters=params)
    return signature


def _parameter_names(signature: inspect.Signature | None) -> set[str] | None:
    """The names a key may use; None when any name may come (no signature, or **kwargs)."""
    if signature is None:
        return None
    params = signature.parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind is not inspect.Parameter.VAR_POSITIONAL}


def _check_template(where: str, template: str, parameters: set[str] | None) -> None:
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise InvalidJobError(
            f"{where}: concurrency_key {template!r} is malformed: {exc}."
        ) from None
    for field in fields:
        base = re.split(r"[.\[]", field, maxsplit=1)[0]
        if not base or base.isdigit():
            raise InvalidJobError(
                f"{where}: concurrency_key {template!r} must name its arguments, such as "
                "'account:{account_id}' (no positional {} or {0})."
            )
        if parameters is not None and base not in parameters:
            raise InvalidJobError(
                f"{where}: concurrency_key {template!r} uses {{{base}}}, which the function "
                f"does not take; its arguments are {', '.join(sorted(parameters))}."
            )
