"""What a test enqueued, read back from the job table: enqueue stores a row in the test's own
database and transaction, so a rolled-back enqueue is rightly absent, and jobs from
`@job` handlers, `enqueue_many` and `django.tasks` tasks are all seen the same way.

Arguments are compared as the handler receives them: bound to its signature, with its
defaults, so `assert_enqueued("shop.send", to="a@x")` matches `send.enqueue("a@x")` too.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from django.db.models import Max
from django.utils.module_loading import import_string

from ..arguments import call_shape
from ..conf import get_settings
from ..exceptions import InvalidJobError
from ..models import Job
from ..registry import registry
from ..states import CLAIMABLE

#: Statuses of a job that waits to run: what `assert_enqueued` looks at by default.
WAITING = tuple(status.value for status in CLAIMABLE)


def _signature(name: str) -> inspect.Signature | None:
    """The signature the enqueue of job `name` was bound to, if this process knows it: a
    `@job` handler's, or that of the django.tasks task whose path the name is."""
    func: Any
    if name in registry:
        handler = registry.get(name)
        func, takes_context = handler.func, handler.options.takes_context
    else:
        try:
            task = import_string(name)
        except (ImportError, ValueError):
            return None
        func, takes_context = getattr(task, "func", None), getattr(task, "takes_context", False)
        if not callable(func):
            return None
    try:
        shape = call_shape(func, name, takes_context=bool(takes_context))
    except InvalidJobError:
        return None
    return shape.signature if shape is not None else None


def _arguments(
    signature: inspect.Signature | None, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any] | None:
    """A call as {parameter: value}; None if it does not fit the signature."""
    if signature is None:
        return {**{f"args[{i}]": value for i, value in enumerate(args)}, **kwargs}
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return dict(bound.arguments)


def _wanted(
    signature: inspect.Signature | None, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    if signature is None:
        return _arguments(None, args, kwargs) or {}
    try:
        return dict(signature.bind_partial(*args, **kwargs).arguments)
    except TypeError as exc:
        raise AssertionError(f"These arguments do not fit {signature}: {exc}") from None


def _matches(
    wanted: Mapping[str, Any], stored: Mapping[str, Any] | None, var_keyword: str | None
) -> bool:
    """Every wanted argument is in the stored call with an equal value; of a `**kwargs`
    parameter, the wanted keywords among those stored."""
    if stored is None:
        return False
    for key, value in wanted.items():
        if key not in stored:
            return False
        have = stored[key]
        if key == var_keyword:
            if any(k not in have or _json(v) != _json(have[k]) for k, v in value.items()):
                return False
        elif _json(value) != _json(have):
            return False
    return True


def _json(value: Any) -> Any:
    """Tuples as the lists JSON gives back, so `(1, 2)` matches a stored `[1, 2]`."""
    if isinstance(value, (tuple, list)):
        return [_json(item) for item in value]
    if isinstance(value, dict):
        return {key: _json(item) for key, item in value.items()}
    return value


def _call(job: Job) -> str:
    parts = [repr(a) for a in job.args] + [f"{k}={v!r}" for k, v in job.kwargs.items()]
    return f"job {job.pk} {job.name}({', '.join(parts)}) [{job.status}]"


def find_jobs(
    jobs: Sequence[Job], name: str, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> list[Job]:
    """The jobs named `name` among `jobs` whose call includes the given arguments."""
    signature = _signature(name)
    wanted = _wanted(signature, args, kwargs)
    var_keyword = next(
        (
            p.name
            for p in (signature.parameters.values() if signature else ())
            if p.kind is inspect.Parameter.VAR_KEYWORD
        ),
        None,
    )
    return [
        job
        for job in jobs
        if job.name == name
        and _matches(wanted, _arguments(signature, job.args, job.kwargs), var_keyword)
    ]


def _explain(jobs: Sequence[Job], name: str, scope: str) -> str:
    same = [job for job in jobs if job.name == name]
    if same:
        return f"{scope} named {name!r}:\n" + "\n".join(f"  {_call(job)}" for job in same[:20])
    names = sorted({job.name for job in jobs})
    return f"No job named {name!r} among {scope.lower()}" + (
        f"; names there: {', '.join(names[:20])}." if names else " (there are none)."
    )


def _assert_found(
    jobs: Sequence[Job], scope: str, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Job:
    found = find_jobs(jobs, name, args, kwargs)
    if not found:
        call = ", ".join([*map(repr, args), *(f"{k}={v!r}" for k, v in kwargs.items())])
        raise AssertionError(f"No job {name}({call}) was enqueued. {_explain(jobs, name, scope)}")
    return found[0]


def _assert_absent(
    jobs: Sequence[Job], scope: str, name: str, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> None:
    found = find_jobs(jobs, name, args, kwargs)
    if found:
        listed = "\n".join(f"  {_call(job)}" for job in found[:20])
        raise AssertionError(f"Expected no such job {name!r}; {scope.lower()} include:\n{listed}")


def enqueued_jobs(name: str | None = None) -> list[Job]:
    """Jobs waiting to run (pending, or failed and due for a retry), oldest first."""
    queryset = Job.objects.using(get_settings().database).filter(status__in=WAITING)
    if name is not None:
        queryset = queryset.filter(name=name)
    return list(queryset.order_by("id"))


def assert_enqueued(name: str, /, *args: Any, **kwargs: Any) -> Job:
    """Assert that a job `name` waits to run, called with at least these arguments (by
    position or keyword, as the handler takes them); return it."""
    return _assert_found(enqueued_jobs(), "Waiting jobs", name, args, kwargs)


def assert_not_enqueued(name: str, /, *args: Any, **kwargs: Any) -> None:
    """Assert that no job `name` (with these arguments, if given) waits to run."""
    _assert_absent(enqueued_jobs(), "Waiting jobs", name, args, kwargs)


class CapturedJobs:
    """The jobs enqueued since it began (in any status by now), read from the table each
    time it is looked at; frozen when its `captured_jobs()` block ends."""

    def __init__(self, alias: str | None = None) -> None:
        self.alias = alias or get_settings().database
        self.after = Job.objects.using(self.alias).aggregate(last=Max("id"))["last"] or 0
        self.until: int | None = None

    def stop(self) -> None:
        self.until = Job.objects.using(self.alias).aggregate(last=Max("id"))["last"] or 0

    @property
    def jobs(self) -> list[Job]:
        queryset = Job.objects.using(self.alias).filter(id__gt=self.after)
        if self.until is not None:
            queryset = queryset.filter(id__lte=self.until)
        return list(queryset.order_by("id"))

    def names(self) -> list[str]:
        return [job.name for job in self.jobs]

    def __iter__(self) -> Iterator[Job]:
        return iter(self.jobs)

    def __len__(self) -> int:
        return len(self.jobs)

    def __getitem__(self, index: int) -> Job:
        return self.jobs[index]

    def filter(self, name: str, /, *args: Any, **kwargs: Any) -> list[Job]:
        """The captured jobs `name` called with at least these arguments."""
        return find_jobs(self.jobs, name, args, kwargs)

    def assert_enqueued(self, name: str, /, *args: Any, **kwargs: Any) -> Job:
        """Assert that a job `name` with these arguments was enqueued; return it."""
        return _assert_found(self.jobs, "Jobs enqueued here", name, args, kwargs)

    def assert_not_enqueued(self, name: str, /, *args: Any, **kwargs: Any) -> None:
        _assert_absent(self.jobs, "Jobs enqueued here", name, args, kwargs)

    def __repr__(self) -> str:
        return f"<CapturedJobs {[_call(job) for job in self.jobs]}>"


@contextmanager
def captured_jobs(using: str | None = None) -> Iterator[CapturedJobs]:
    """`with captured_jobs() as captured: ...`: the jobs enqueued inside the block."""
    captured = CapturedJobs(using)
    try:
        yield captured
    finally:
        captured.stop()
