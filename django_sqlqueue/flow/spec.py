"""Flow control's view of a handler: its options (`JobOptions`: unique, concurrency, rate
limit) bound to its function's signature, the checks that need the signature, and the keys it
gives each enqueued job. Pure: no database, importable before Django's app registry is ready."""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..exceptions import InvalidJobError
from ..options import JobOptions
from ..validation import string_reason

#: Longest concurrency key stored (the column's length).
MAX_CONCURRENCY_KEY = 200


@dataclass(frozen=True)
class FlowSpec:
    """One handler's flow control: its options and, to name positional arguments, its
    signature (the context parameter removed)."""

    options: JobOptions
    signature: inspect.Signature | None = None

    @property
    def name(self) -> str:
        return self.options.name

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
        unique_by = self.options.unique_by
        if unique_by is None:
            compared: Any = [list(args), dict(kwargs)]
        else:
            named = self.named_arguments(args, kwargs)
            compared = {name: named.get(name) for name in unique_by}
        text = json.dumps([self.name, compared], sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def key_for_concurrency(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
        if self.options.concurrency is None:
            return None
        template = self.options.concurrency_key
        if template is None:
            return self.name
        if callable(template):
            value = self._called_key(template, args, kwargs)
        else:
            value = self._formatted_key(template, self.named_arguments(args, kwargs))
        if len(value) > MAX_CONCURRENCY_KEY:
            raise InvalidJobError(
                f"Job {self.name!r}: concurrency key {value[:40]!r}… is longer than "
                f"{MAX_CONCURRENCY_KEY} characters; use shorter arguments in concurrency_key."
            )
        reason = string_reason(value)
        if reason:
            raise InvalidJobError(
                f"Job {self.name!r}: concurrency key {value[:40]!r} cannot be stored: {reason}; "
                "leave that character out of the arguments concurrency_key uses."
            )
        return value

    def _called_key(
        self, template: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> str:
        try:
            value = template(*args, **kwargs)
        except Exception as exc:
            raise InvalidJobError(
                f"Job {self.name!r}: concurrency_key raised {type(exc).__name__}: {exc}; "
                "it must return a string for any arguments the job is enqueued with."
            ) from exc
        if not isinstance(value, str) or not value:
            raise InvalidJobError(
                f"Job {self.name!r}: concurrency_key returned {value!r}; it must return a "
                "non-empty string."
            )
        return value

    def _formatted_key(self, template: str, named: dict[str, Any]) -> str:
        missing = [field for field in template_fields(template) if field not in named]
        if missing:
            raise InvalidJobError(
                f"Job {self.name!r}: concurrency_key {template!r} needs the argument "
                f"{missing[0]!r}, which this enqueue did not pass; pass it, or change the key."
            )
        try:
            return template.format_map(named)
        except Exception as exc:  # a format spec or an index the value does not fit
            shown = {field: named[field] for field in template_fields(template)}
            raise InvalidJobError(
                f"Job {self.name!r}: concurrency_key {template!r} cannot be filled in with "
                f"{shown!r:.200}: {type(exc).__name__}: {exc}; pass arguments of the type "
                "the key expects, or change the key."
            ) from None


class GatedJobs:
    """The options of the registered jobs that have a concurrency or rate limit, by name: what
    a claimer's gate reads (the registry fills it), with a version bumped on every change."""

    def __init__(self) -> None:
        self.specs: dict[str, JobOptions] = {}
        self.version = 0

    def set(self, name: str, options: JobOptions | None) -> None:
        if options is not None and options.gated:
            self.specs[name] = options
        else:
            self.specs.pop(name, None)
        self.version += 1


GATED = GatedJobs()


def build_spec(options: JobOptions, func: Callable[..., Any]) -> FlowSpec | None:
    """The handler's FlowSpec (None when it uses no flow control); InvalidJobError when an
    option names an argument the function does not take."""
    if not options.uses_flow_control:
        return None
    where = f"@job({options.name!r})"
    signature = _signature(func, options.takes_context)
    parameters = _parameter_names(signature)
    unknown = [n for n in options.unique_by or () if parameters is not None and n not in parameters]
    if unknown:
        raise InvalidJobError(
            f"{where}: unique_by names {', '.join(map(repr, unknown))}, which the "
            f"function does not take; its arguments are {', '.join(sorted(parameters or ()))}."
        )
    if isinstance(options.concurrency_key, str):
        _check_template(where, options.concurrency_key, parameters)
    return FlowSpec(options, signature)


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


def template_fields(template: str) -> list[str]:
    """The argument names a concurrency_key template uses ('{user.id}' uses 'user')."""
    return [
        re.split(r"[.\[]", field, maxsplit=1)[0]
        for _, field, _, _ in string.Formatter().parse(template)
        if field is not None
    ]


def _check_template(where: str, template: str, parameters: set[str] | None) -> None:
    try:
        fields = template_fields(template)
    except ValueError as exc:
        raise InvalidJobError(
            f"{where}: concurrency_key {template!r} is malformed: {exc}."
        ) from None
    for base in fields:
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
