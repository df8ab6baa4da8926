"""A task's arguments as the backend stores them: normalised as the framework does, checked to
come back from the database unchanged, and checked against the task function's signature,
which Django's `Task.enqueue` passes on unchecked."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..arguments import check_task_call as check_call
from ..conf import get_settings
from ..exceptions import InvalidJobError
from ..validation import check_arguments, conversion_hint
from .compat import normalize_json


class InvalidTaskArguments(InvalidJobError, TypeError):
    """Task arguments that do not survive a JSON round trip, or that the task's function
    cannot take; nothing was stored.

    A TypeError, as the framework raises for arguments it cannot serialise.
    """


def _unsupported(value: Any) -> tuple[str, Any] | None:
    """The path below `value` and the part of it that `normalize_json` refuses (it walks
    mappings and sequences, decodes bytes, keeps JSON scalars)."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return None
    if isinstance(value, bytes):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return "", value
        return None
    if isinstance(value, Mapping):
        items: Any = value.items()
    elif isinstance(value, Sequence):
        items = enumerate(value)
    else:
        return "", value
    for key, item in items:
        found = _unsupported(key) if isinstance(value, Mapping) else None
        if found is not None:
            return f" key {key!r}", found[1]
        found = _unsupported(item)
        if found is not None:
            return f"[{key!r}]{found[0]}", found[1]
    return None


def _normalized(value: Any, where: str) -> Any:
    try:
        return normalize_json(value)
    except (TypeError, ValueError) as exc:
        found = _unsupported(value)
        path, bad = found if found is not None else ("", value)
        hint = conversion_hint(bad)
        raise InvalidTaskArguments(
            f"Task argument {where}{path} cannot be stored: {exc}" + (f"; {hint}." if hint else ".")
        ) from exc


def storable_arguments(
    args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """The arguments as the framework normalises them (tuples become lists), checked to come
    back from the database unchanged; InvalidTaskArguments naming the first bad one."""
    stored_args = [_normalized(value, f"args[{i}]") for i, value in enumerate(args)]
    stored_kwargs = {key: _normalized(value, key) for key, value in kwargs.items()}
    try:
        check_arguments(stored_args, stored_kwargs, get_settings().max_arguments_bytes)
    except InvalidJobError as exc:
        raise InvalidTaskArguments(str(exc).replace("Job argument", "Task argument")) from exc
    return stored_args, stored_kwargs


def check_task_call(
    func: Callable[..., Any],
    path: str,
    takes_context: bool,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
) -> None:
    """InvalidTaskArguments unless the task's function can take these arguments."""
    check_call(func, path, takes_context, args, kwargs, error=InvalidTaskArguments)
