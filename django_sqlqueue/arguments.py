"""Enqueue arguments checked against the handler's signature, so that a call the handler could
never accept fails in the caller, not five attempts later in a worker with a TypeError.

`inspect.Signature.bind` is the authority, but it costs a few microseconds on every enqueue.
`CallShape` answers the common cases (keyword arguments only, or positional only) with two
set comparisons from facts read once per handler, and asks `bind` only to confirm a refusal
and word its message, or for calls that mix the two.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .exceptions import InvalidJobError

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


class CallShape:
    """What calls one handler accepts, read from its signature once."""

    __slots__ = (
        "_keyword_only_required",
        "accepts_all",
        "error",
        "keyword_names",
        "max_positional",
        "min_positional",
        "name",
        "positional_only_names",
        "positional_only_required",
        "required_keywords",
        "signature",
        "var_keyword",
        "what",
        "where",
    )

    def __init__(
        self,
        signature: inspect.Signature,
        name: str,
        where: str,
        what: str = "Job",
        error: type[InvalidJobError] = InvalidJobError,
    ) -> None:
        self.signature = signature
        self.name = name
        self.where = where
        self.what = what
        self.error = error
        params = list(signature.parameters.values())
        positional = [p for p in params if p.kind in _POSITIONAL]
        var_positional = any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)
        self.var_keyword = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
        named = (*_POSITIONAL, *_KEYWORD)
        required = [p for p in params if p.default is p.empty and p.kind in named]
        self.keyword_names = frozenset(p.name for p in params if p.kind in _KEYWORD)
        self.required_keywords = frozenset(p.name for p in required if p.kind in _KEYWORD)
        # Python lets `def f(a, /, **kw)` take `a=` into `kw`, but Signature.bind refuses it:
        # the fast path follows bind, the authority here.
        self.positional_only_names = frozenset(
            p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_ONLY
        )
        self.positional_only_required = any(
            p.kind is inspect.Parameter.POSITIONAL_ONLY for p in required
        )
        self.min_positional = sum(1 for p in required if p.kind in _POSITIONAL)
        self.max_positional = None if var_positional else len(positional)
        # `def f(*args, **kwargs)`: nothing to check.
        self.accepts_all = var_positional and self.var_keyword and len(params) == 2
        self._keyword_only_required = any(
            p.kind is inspect.Parameter.KEYWORD_ONLY for p in required
        )

    def accepts(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
        """Whether the handler can be called with these arguments (fast, then exact)."""
        if self.accepts_all:
            return True
        if not args:
            keys = kwargs.keys()
            if (
                not self.positional_only_required
                and self.required_keywords <= keys
                and (self.var_keyword or keys <= self.keyword_names)
                and self.positional_only_names.isdisjoint(keys)
            ):
                return True
        elif not kwargs:
            count = len(args)
            if (
                count >= self.min_positional
                and (self.max_positional is None or count <= self.max_positional)
                and not self._keyword_only_required
            ):
                return True
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError:
            return False
        return True

    def unexpected_keyword(self, kwargs: Mapping[str, Any]) -> str | None:
        """A keyword the function has no parameter for, named first (with the closest name
        it has): `too="x"` is a typo of `to`, not a missing `to`. None if every keyword is
        known, or the function takes **kwargs."""
        params = self.signature.parameters.values()
        if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
            return None
        names = [
            p.name
            for p in params
            if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        ]
        for keyword in kwargs:
            if keyword not in names:
                guess = _closest(keyword, names)
                hint = f" (did you mean {guess!r}?)" if guess else ""
                return f"got an unexpected keyword argument {keyword!r}{hint}"
        return None

    def check(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
        """Raise InvalidJobError, naming the problem and the signature, unless accepted."""
        if self.accepts(args, kwargs):
            return
        problem = self.unexpected_keyword(kwargs)
        if problem is None:
            try:
                self.signature.bind(*args, **kwargs)
            except TypeError as exc:
                problem = str(exc)
            else:  # pragma: no cover - accepts() asks bind itself before refusing
                return
        raise self.error(
            f"{self.what} {self.name!r} cannot take these arguments: {problem}. Its function "
            f"is {self.where}{self.signature}; nothing was stored."
        )


def _closest(name: str, candidates: Sequence[str]) -> str | None:
    matches = difflib.get_close_matches(name, candidates, n=1)
    return matches[0] if matches else None


def call_shape(
    func: Callable[..., Any],
    name: str,
    *,
    takes_context: bool = False,
    what: str = "Job",
    error: type[InvalidJobError] = InvalidJobError,
) -> CallShape | None:
    """The shape of the calls `func` accepts from an enqueue (without the context argument
    a worker passes first to a `takes_context` handler); None when Python cannot read its
    signature (some builtins), in which case nothing is checked."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    # `a: int` rather than `a: 'int'` in messages, where the annotations resolve.
    with contextlib.suppress(Exception):
        signature = inspect.signature(func, eval_str=True)
    if takes_context:
        params = list(signature.parameters.values())
        if params and params[0].kind in _POSITIONAL:
            signature = signature.replace(parameters=params[1:])
        elif not params or params[0].kind is not inspect.Parameter.VAR_POSITIONAL:
            raise error(
                f"{what} {name!r} takes its context (takes_context=True), but its function "
                f"{_where(func)}{signature} has no positional parameter to receive it; "
                "nothing was stored."
            )
    return CallShape(signature, name, _where(func), what, error)


def _where(func: Callable[..., Any]) -> str:
    module = getattr(func, "__module__", None)
    qualname = getattr(func, "__qualname__", None) or type(func).__qualname__
    return f"{module}.{qualname}" if module else qualname


_task_shapes: weakref.WeakKeyDictionary[Callable[..., Any], CallShape | None] = (
    weakref.WeakKeyDictionary()
)


def check_task_call(
    func: Callable[..., Any],
    name: str,
    takes_context: bool,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    error: type[InvalidJobError] = InvalidJobError,
) -> None:
    """`CallShape.check` for a django.tasks task, its shape cached per function (a Task is
    a frozen dataclass: nothing can be cached on it)."""
    try:
        shape = _task_shapes[func]
    except KeyError:
        shape = call_shape(func, name, takes_context=takes_context, what="Task", error=error)
        _task_shapes[func] = shape
    except TypeError:  # not weakly referenceable: read it each time
        shape = call_shape(func, name, takes_context=takes_context, what="Task", error=error)
    if shape is not None:
        shape.check(args, kwargs)
