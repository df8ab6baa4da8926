"""Enqueue arguments are bound to the handler's signature in the caller: a call the handler
could never take is refused with the problem and the signature, and nothing is stored (before,
it was stored and failed with TypeError in a worker on every attempt until dead).

Also the hints of argument errors: how to pass a datetime, a model instance, a Decimal ...
"""

from __future__ import annotations

import datetime as dt
import decimal
import enum
import inspect
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from django_sqlqueue import InvalidJobError, enqueue
from django_sqlqueue.arguments import CallShape, call_shape
from django_sqlqueue.models import Job
from tests.tasksapp.tasks_settings import TASKS
from tests.testapp.jobs import add, noop, record
from tests.testapp.models import Order

pytestmark = pytest.mark.django_db


@pytest.fixture
def refused(alias: str) -> Callable[..., str]:
    """`refused(action, error=InvalidJobError)`: it raises, stores nothing; the message."""

    def check(action: Callable[[], Any], error: type[Exception] = InvalidJobError) -> str:
        with pytest.raises(error) as info:
            action()
        assert not Job.objects.using(alias).exists(), "a refused enqueue stored a job"
        return str(info.value)

    return check


class TestJobArguments:
    def test_an_unexpected_keyword_is_named_with_the_signature(self, refused: Any) -> None:
        message = refused(lambda: add.enqueue(a=1, b=2, c=3))
        assert "'tests.add'" in message
        assert "unexpected keyword argument 'c'" in message
        assert "tests.testapp.jobs.add(a, b)" in message

    def test_a_typo_is_named_as_unexpected_with_the_closest_name(self, refused: Any) -> None:
        """`label_="x"` is a typo of `label`, not a missing argument (Python names the
        unexpected keyword first too)."""
        message = refused(lambda: add.enqueue(a=1, bb=2))
        assert "unexpected keyword argument 'bb' (did you mean 'b'?)" in message
        assert "missing" not in message
        assert "did you mean" not in refused(lambda: add.enqueue(a=1, zzz=2))

    def test_a_missing_argument_is_named(self, refused: Any) -> None:
        message = refused(lambda: add.enqueue(1))
        assert "missing a required argument: 'b'" in message

    def test_too_many_positional_arguments(self, refused: Any) -> None:
        assert "too many positional arguments" in refused(lambda: add.enqueue(1, 2, 3))

    def test_a_value_given_twice(self, refused: Any) -> None:
        assert "multiple values for argument 'a'" in refused(lambda: add.enqueue(1, a=2))

    def test_calls_the_handler_accepts_are_stored(self, alias: str) -> None:
        add.enqueue(1, 2)
        add.enqueue(1, b=2)
        add.enqueue(a=1, b=2)
        noop.enqueue(1, x=[1])
        assert Job.objects.using(alias).count() == 4

    def test_a_context_handler_binds_without_its_context(self, refused: Any) -> None:
        # record(context, label="", sleep=0.0): the worker passes the context first.
        record.enqueue(label="x")
        record.enqueue("x", 0.5)
        Job.objects.all().delete()
        message = refused(lambda: record.enqueue("x", 0.5, "one too many"))
        assert "too many positional arguments" in message
        assert "(label='', sleep=0.0)" in message
        assert "context" not in message.split("Its function is")[1]

    def test_a_context_handler_without_room_for_its_context(
        self, refused: Any, register_job: Any
    ) -> None:
        def keyword_only(*, label: str) -> None:
            return None

        handler = register_job("tests.sig.no_context_slot", keyword_only, takes_context=True)
        assert "no positional parameter" in refused(lambda: handler.enqueue(label="x"))

    def test_enqueue_many_names_the_item_and_stores_none(self, refused: Any) -> None:
        message = refused(lambda: add.enqueue_many([{"a": 1, "b": 2}, {"a": 1}]))
        assert "enqueue_many item 1" in message
        assert "missing a required argument: 'b'" in message

    def test_enqueue_by_name(self, refused: Any) -> None:
        assert "unexpected keyword argument 'x'" in refused(lambda: enqueue("tests.add", 1, 2, x=1))

    def test_enqueue_with_options(self, refused: Any) -> None:
        message = refused(lambda: add.using(priority=5, queue="q").enqueue(1, 2, 3))
        assert "too many positional arguments" in message

    def test_a_keyword_only_and_positional_only_handler(
        self, refused: Any, register_job: Any
    ) -> None:
        def strict(a: int, /, b: int, *, c: int = 0) -> None:
            return None

        handler = register_job("tests.sig.strict", strict)
        handler.enqueue(1, 2, c=3)
        handler.enqueue(1, b=2)
        Job.objects.all().delete()
        assert "'a'" in refused(lambda: handler.enqueue(a=1, b=2))
        assert "too many positional" in refused(lambda: handler.enqueue(1, 2, 3))

    def test_a_handler_without_a_readable_signature_is_not_checked(
        self, alias: str, register_job: Any
    ) -> None:
        handler = register_job("tests.sig.builtin", max)
        handler.enqueue(1, 2, 3)
        assert Job.objects.using(alias).count() == 1

    def test_the_signature_is_read_once_per_handler(self, register_job: Any) -> None:
        handler = register_job("tests.sig.once", lambda a: a)
        handler.enqueue(1)
        shape = handler._call_shape
        handler.enqueue(2)
        assert shape is not None and handler._call_shape is shape


# Every kind of parameter, with and without defaults, in the orders Python allows.
_KINDS = st.lists(
    st.tuples(
        st.sampled_from(
            [
                inspect.Parameter.POSITIONAL_ONLY,
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                inspect.Parameter.VAR_POSITIONAL,
                inspect.Parameter.KEYWORD_ONLY,
                inspect.Parameter.VAR_KEYWORD,
            ]
        ),
        st.booleans(),
    ),
    max_size=6,
)


def _signature(spec: list[tuple[inspect._ParameterKind, bool]]) -> inspect.Signature:
    """A valid signature from a random list of (kind, has default)."""
    params: list[inspect.Parameter] = []
    seen_default = False
    for index, (kind, default) in enumerate(sorted(spec, key=lambda item: item[0])):
        if kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            if any(p.kind is kind for p in params):
                continue
            params.append(inspect.Parameter(f"p{index}", kind))
            continue
        if kind is not inspect.Parameter.KEYWORD_ONLY:
            default = default or seen_default  # no required positional after a default
            seen_default = default
        value = 0 if default else inspect.Parameter.empty
        params.append(inspect.Parameter(f"p{index}", kind, default=value))
    return inspect.Signature(params)


@settings(max_examples=400, deadline=None)
@given(
    spec=_KINDS,
    positional=st.integers(min_value=0, max_value=4),
    keywords=st.sets(st.sampled_from(["p0", "p1", "p2", "p3", "p4", "p5", "other"]), max_size=4),
)
def test_the_fast_path_agrees_with_signature_bind(
    spec: list[tuple[inspect._ParameterKind, bool]], positional: int, keywords: set[str]
) -> None:
    signature = _signature(spec)
    shape = CallShape(signature, "tests.sig.random", "f")
    args = list(range(positional))
    kwargs = dict.fromkeys(keywords, 0)
    try:
        signature.bind(*args, **kwargs)
        expected = True
    except TypeError:
        expected = False
    assert shape.accepts(args, kwargs) is expected, (signature, args, kwargs)


def test_call_shape_of_a_partial() -> None:
    import functools

    shape = call_shape(functools.partial(lambda a, b: None, 1), "tests.sig.partial")
    assert shape is not None and shape.accepts([2], {})
    assert not shape.accepts([2, 3], {})


@pytest.mark.skipif(not TASKS, reason="no Tasks framework installed")
class TestTaskArguments:
    def test_a_task_call_its_function_cannot_take_is_a_type_error(self, refused: Any) -> None:
        from django_sqlqueue.backend import InvalidTaskArguments
        from tests.tasksapp import tasks

        message = refused(lambda: tasks.add.enqueue(1, 2, c=2), error=InvalidTaskArguments)
        assert "Task 'tests.tasksapp.tasks.add'" in message
        assert "unexpected keyword argument 'c'" in message
        assert issubclass(InvalidTaskArguments, TypeError)

    def test_a_context_task_binds_without_its_context(self, alias: str, refused: Any) -> None:
        from tests.tasksapp import tasks

        tasks.record.enqueue("x")
        assert Job.objects.using(alias).count() == 1
        Job.objects.all().delete()
        assert "missing a required argument: 'label'" in refused(lambda: tasks.record.enqueue())

    def test_a_non_json_task_argument_gets_a_hint(self, refused: Any) -> None:
        from tests.tasksapp import tasks

        message = refused(lambda: tasks.add.enqueue({"when": [dt.date(2026, 1, 2)]}, 1))
        assert "args[0]['when'][0]" in message
        assert "pass `.isoformat()`" in message


class Colour(enum.Enum):
    RED = "red"


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        (dt.datetime(2026, 1, 2, 3, 4), "pass `.isoformat()`"),
        (dt.date(2026, 1, 2), "pass `.isoformat()` and read it back with `date.fromisoformat()`"),
        (dt.time(3, 4), "`time.fromisoformat()`"),
        (dt.timedelta(minutes=5), "pass `.total_seconds()`"),
        (decimal.Decimal("1.10"), "pass `str(value)`"),
        (uuid.uuid4(), "pass `str(value)`"),
        (Path("/tmp/x"), "pass `str(value)`"),
        ({"a"}, "pass a list"),
        (frozenset({"a"}), "pass a list"),
        (b"raw", "`.decode()`"),
        (Colour.RED, "pass `.value`"),
    ],
    ids=lambda value: type(value).__name__,
)
def test_argument_errors_say_how_to_pass_the_value(refused: Any, value: Any, hint: str) -> None:
    message = refused(lambda: noop.enqueue(when=value))
    assert hint in message, message


def test_a_model_instance_gets_the_pk_hint(refused: Any) -> None:
    order = Order.objects.create()
    message = refused(lambda: noop.enqueue(order=order))
    assert "pass its primary key, `.pk`" in message
    Order.objects.all().delete()
    message = refused(lambda: noop.enqueue(orders=Order.objects.all()))
    assert "values_list('pk', flat=True)" in message
