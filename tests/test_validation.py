"""Bad input is refused at enqueue time with a clear InvalidJobError, and nothing is stored."""

from __future__ import annotations

import datetime as dt
import decimal
import re
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connections, transaction
from django.utils import timezone

from django_sqlqueue import InvalidJobError, UnknownJobError, enqueue, job
from django_sqlqueue.models import Job
from django_sqlqueue.validation import INT64_MAX, INT64_MIN, json_size
from tests.testapp.jobs import noop
from tests.testapp.models import Order

pytestmark = pytest.mark.django_db


@pytest.fixture
def refused(alias: str) -> Callable[..., pytest.ExceptionInfo[InvalidJobError]]:
    """`refused(callable, match=...)`: it raises InvalidJobError and leaves the table empty."""

    def check(
        action: Callable[[], Any], match: str | None = None, error: type = InvalidJobError
    ) -> pytest.ExceptionInfo[InvalidJobError]:
        with pytest.raises(error, match=match) as info:
            action()
        assert Job.objects.using(alias).count() == 0, "a refused enqueue stored a job"
        return info

    return check


class TestArguments:
    @pytest.mark.parametrize(
        ("args", "kwargs", "where", "kind"),
        [
            ((object(),), {}, r"args\[0\]", "object"),
            ((1, decimal.Decimal("1.5")), {}, r"args\[1\]", "Decimal"),
            ((), {"when": dt.datetime(2024, 1, 1)}, "when", "datetime"),
            ((), {"day": dt.date(2024, 1, 1)}, "day", "date"),
            ((), {"ident": uuid.uuid4()}, "ident", "UUID"),
            ((), {"tags": {"a", "b"}}, "tags", "set"),
            ((), {"raw": b"bytes"}, "raw", "bytes"),
            (
                (),
                {"payload": {"a": [1, {"deep": object()}]}},
                r"payload\['a'\]\[1\]\['deep'\]",
                "object",
            ),
            (([1, [2, noop]],), {}, r"args\[0\]\[1\]\[1\]", "JobHandler"),
        ],
        ids=["object", "decimal", "datetime", "date", "uuid", "set", "bytes", "nested", "handler"],
    )
    def test_non_json_argument_is_named_with_its_type(
        self, refused: Any, args: tuple, kwargs: dict, where: str, kind: str
    ) -> None:
        info = refused(lambda: noop.enqueue(*args, **kwargs))
        message = str(info.value)
        assert kind in message, message
        assert re.search(where, message), message

    @pytest.mark.parametrize(
        ("args", "kwargs", "where"),
        [
            (((1, 2),), {}, r"args\[0\]"),
            ((), {"point": (1, 2)}, "point"),
            ((), {"rows": [[1], (2,)]}, r"rows\[1\]"),
        ],
        ids=["positional", "keyword", "nested"],
    )
    def test_tuples_are_refused(self, refused: Any, args: tuple, kwargs: dict, where: str) -> None:
        refused(lambda: noop.enqueue(*args, **kwargs), match=rf"(?s){where}.*tuple")

    @pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")], ids=repr)
    def test_nan_and_infinity_are_refused(self, refused: Any, value: float) -> None:
        refused(lambda: noop.enqueue(ratio=value), match=r"ratio.*JSON cannot represent")
        refused(lambda: noop.enqueue([1.0, value]), match=r"args\[0\]\[1\]")

    @pytest.mark.parametrize("key", [1, None, 2.5, ("a",), True], ids=repr)
    def test_non_string_dict_keys_are_refused(self, refused: Any, key: Any) -> None:
        refused(
            lambda: noop.enqueue(mapping={key: "value"}),
            match=rf"mapping.*dict key of type {type(key).__name__}",
        )

    def test_lone_surrogate_in_a_value_is_refused(self, refused: Any) -> None:
        refused(lambda: noop.enqueue(text="ok \ud800 not ok"), match=r"text.*surrogate")
        refused(lambda: noop.enqueue(["\udfff"]), match=r"args\[0\]\[0\].*surrogate")

    def test_lone_surrogate_in_a_dict_key_is_refused(self, refused: Any) -> None:
        """A key is text too; PostgreSQL and MariaDB reject it, SQLite would store it."""
        refused(lambda: noop.enqueue(mapping={"\ud800": 1}), match="surrogate")

    @pytest.mark.parametrize(
        "value",
        [INT64_MAX + 1, INT64_MIN - 1, 10**30, -(10**30)],
        ids=["max+1", "min-1", "1e30", "-1e30"],
    )
    def test_integers_beyond_64_bits_are_refused(self, refused: Any, value: int) -> None:
        refused(lambda: noop.enqueue(count=value), match=r"count.*64 bits")

    @pytest.mark.parametrize("value", [1e16, -2.5e20, 1.5e300], ids=repr)
    def test_floats_postgresql_would_turn_into_integers_are_refused(
        self, refused: Any, value: float
    ) -> None:
        """jsonb prints 1e16 as 10000000000000000: it would come back as an int."""
        refused(lambda: noop.enqueue(amount=value), match=r"amount.*back as an integer")

    def test_too_deep_nesting_is_refused(self, refused: Any) -> None:
        value: Any = []
        for _ in range(100_000):
            value = [value]
        refused(lambda: noop.enqueue(value), match="nesting deeper than 30")

    def test_positional_argument_path_names_the_dict_key(self, refused: Any) -> None:
        refused(lambda: noop.enqueue({"when": object()}), match=r"args\[0\]\['when'\]")

    def test_the_path_walks_down_lists_and_dicts_in_order(self, refused: Any) -> None:
        info = refused(lambda: noop.enqueue(payload={"a": [1, {"b": [None, float("nan")]}]}))
        assert str(info.value) == (
            "Job 'tests.noop': argument payload['a'][1]['b'][1] cannot be stored: "
            "nan, which JSON cannot represent."
        )

    def test_a_bad_dict_key_is_named_after_its_dict(self, refused: Any) -> None:
        info = refused(lambda: noop.enqueue([{"x": {"bad\x00key": 1}}]))
        assert str(info.value) == (
            "Job 'tests.noop': argument args[0][0]['x'] key 'bad\\x00key' cannot be stored: "
            "a string containing a NUL character, which PostgreSQL cannot store."
        )


class TestArgumentsThatAreFine:
    """The edges of what is accepted come back from the database exactly as given."""

    @pytest.mark.parametrize(
        "value",
        [
            INT64_MAX,
            INT64_MIN,
            0,
            -0.0,
            0.1,
            1e-7,
            9.999e15,
            "",
            "ünïcødé ✓ 😀",
            None,
            True,
            [],
            {},
            {"nested": {"list": [1, "two", None, False, 3.25]}},
        ],
        ids=repr,
    )
    def test_round_trip(self, alias: str, value: Any) -> None:
        stored = Job.objects.using(alias).get(pk=noop.enqueue(value, named=value).pk)
        assert stored.args == [value]
        assert stored.kwargs == {"named": value}
        assert type(stored.args[0]) is type(value)

    def test_nul_character_round_trips_or_is_refused(self, alias: str) -> None:
        """PostgreSQL's jsonb cannot hold U+0000: refuse it clearly, never a database error."""
        try:
            job = noop.enqueue("a\x00b", key={"k\x00": 1})
        except InvalidJobError as exc:
            assert "args[0]" in str(exc) or "key" in str(exc)
            assert Job.objects.using(alias).count() == 0
        else:
            stored = Job.objects.using(alias).get(pk=job.pk)
            assert stored.args == ["a\x00b"]
            assert stored.kwargs == {"key": {"k\x00": 1}}

    def test_non_ascii_arguments_are_stored_escaped(self, alias: str) -> None:
        """The text an enqueue stores is ASCII (four-byte characters as JSON escapes): a MySQL
        connection in Django's default three-byte `utf8` charset could not take them raw."""
        value = "ünï ✓ 😀"
        job = noop.enqueue(value, named=[value])
        if connections[alias].vendor != "postgresql":  # jsonb keeps parsed values, not text
            with connections[alias].cursor() as cursor:
                cursor.execute(
                    "SELECT args, kwargs FROM django_sqlqueue_job WHERE id = %s", [job.pk]
                )
                texts = cursor.fetchone()
            assert all(text.isascii() for text in texts), texts
        stored = Job.objects.using(alias).get(pk=job.pk)
        assert (stored.args, stored.kwargs) == ([value], {"named": [value]})

    @pytest.mark.parametrize("text", ["x", "é", "😀"], ids=["ascii", "two-byte", "four-byte"])
    def test_the_size_limit_counts_the_utf8_bytes_of_compact_json(
        self, alias: str, settings: Any, text: str
    ) -> None:
        """MAX_ARGUMENTS_BYTES holds `[args,kwargs]` as compact UTF-8 JSON: at the limit it is
        stored, one byte over it is refused."""
        args, kwargs = [text * 10], {"k": text * 20}
        size = json_size([args, kwargs])
        assert size == len(f'[["{text * 10}"],{{"k":"{text * 20}"}}]'.encode())
        settings.SQLQUEUE = {**settings.SQLQUEUE, "MAX_ARGUMENTS_BYTES": size}
        assert Job.objects.using(alias).get(pk=noop.enqueue(*args, **kwargs).pk).args == args
        settings.SQLQUEUE = {**settings.SQLQUEUE, "MAX_ARGUMENTS_BYTES": size - 1}
        with pytest.raises(InvalidJobError, match=f"{size} bytes as JSON.*MAX_ARGUMENTS_BYTES"):
            noop.enqueue(*args, **kwargs)
        assert Job.objects.using(alias).count() == 1


class TestRunAtAndDelay:
    def test_naive_run_at_with_use_tz(self, refused: Any, settings: Any) -> None:
        assert settings.USE_TZ
        naive = dt.datetime(2030, 1, 1, 12, 0)
        refused(lambda: noop.using(run_at=naive).enqueue(), match="naive")

    def test_aware_run_at_in_any_zone_is_kept(self, alias: str) -> None:
        tokyo = dt.timezone(timedelta(hours=9))
        run_at = dt.datetime(2030, 1, 1, 12, 0, tzinfo=tokyo)
        stored = Job.objects.using(alias).get(pk=noop.using(run_at=run_at).enqueue().pk)
        assert stored.run_at == run_at

    def test_naive_run_at_without_use_tz_is_accepted(self, alias: str, settings: Any) -> None:
        settings.USE_TZ = False
        naive = dt.datetime(2030, 1, 1, 12, 0)
        stored = Job.objects.using(alias).get(pk=noop.using(run_at=naive).enqueue().pk)
        assert stored.run_at == naive

    def test_run_at_and_delay_together(self, refused: Any) -> None:
        options = {"run_at": timezone.now(), "delay": timedelta(seconds=5)}
        refused(lambda: noop.using(**options).enqueue(), match="run_at or delay, not both")

    @pytest.mark.parametrize("run_at", ["2030-01-01", 1893456000, dt.date(2030, 1, 1)], ids=repr)
    def test_run_at_must_be_a_datetime(self, refused: Any, run_at: Any) -> None:
        refused(lambda: noop.using(run_at=run_at).enqueue(), match="run_at must be a datetime")

    @pytest.mark.parametrize("delay", [-1, timedelta(seconds=-1)], ids=repr)
    def test_negative_delay(self, refused: Any, delay: Any) -> None:
        refused(lambda: noop.using(delay=delay).enqueue(), match="negative")

    @pytest.mark.parametrize("delay", ["5", True, [5]], ids=repr)
    def test_delay_must_be_seconds_or_timedelta(self, refused: Any, delay: Any) -> None:
        refused(lambda: noop.using(delay=delay).enqueue(), match="delay must be")

    @pytest.mark.parametrize(
        "delay", [float("nan"), float("inf"), timedelta.max], ids=["nan", "inf", "timedelta.max"]
    )
    def test_delay_that_is_no_point_in_time(self, refused: Any, delay: Any) -> None:
        """NaN, infinity or a date past year 9999 are bad input, not a crash in datetime."""
        refused(lambda: noop.using(delay=delay).enqueue(), match="delay")


class TestPriority:
    @pytest.mark.parametrize("priority", [-100, -1, 0, 1, 100])
    def test_bounds_are_inclusive(self, alias: str, priority: int) -> None:
        stored = Job.objects.using(alias).get(pk=noop.using(priority=priority).enqueue().pk)
        assert stored.priority == priority

    @pytest.mark.parametrize("priority", [-101, 101, 32767, -(2**40)])
    def test_out_of_range(self, refused: Any, priority: int) -> None:
        refused(
            lambda: noop.using(priority=priority).enqueue(),
            match=rf"between -100 and 100, got {priority}",
        )

    @pytest.mark.parametrize("priority", ["5", 1.0, 2.5, True, False, [1]], ids=repr)
    def test_not_an_integer(self, refused: Any, priority: Any) -> None:
        refused(
            lambda: noop.using(priority=priority).enqueue(),
            match=rf"priority must be an integer, got {type(priority).__name__}",
        )

    def test_bad_priority_from_settings(self, refused: Any, settings: Any) -> None:
        """A setting no job could use is a configuration error, named as such."""
        settings.SQLQUEUE = {**settings.SQLQUEUE, "DEFAULT_PRIORITY": 500}
        refused(lambda: noop.enqueue(), match="DEFAULT_PRIORITY", error=ImproperlyConfigured)


class TestMaxAttempts:
    @pytest.mark.parametrize("max_attempts", [0, -1, 2**31, 10**30])
    def test_out_of_the_columns_range(self, refused: Any, max_attempts: int) -> None:
        refused(
            lambda: noop.using(max_attempts=max_attempts).enqueue(),
            match=r"max_attempts must be between 1 and 2147483647",
        )

    @pytest.mark.parametrize("max_attempts", ["3", 2.0, True], ids=repr)
    def test_not_an_integer(self, refused: Any, max_attempts: Any) -> None:
        refused(
            lambda: noop.using(max_attempts=max_attempts).enqueue(),
            match="max_attempts must be an integer",
        )

    def test_one_is_enough(self, alias: str) -> None:
        stored = Job.objects.using(alias).get(pk=noop.using(max_attempts=1).enqueue().pk)
        assert stored.max_attempts == 1


class TestOptions:
    def test_unknown_option_to_using(self, refused: Any) -> None:
        info = refused(lambda: noop.using(prority=5), match="prority")
        assert "priority" in str(info.value), "the message lists the known options"

    def test_unknown_option_on_a_bound_job(self, refused: Any) -> None:
        refused(lambda: noop.using(queue="a").using(timeout=5), match="timeout")

    @pytest.mark.parametrize("queue", [5, " ", "q" * 101], ids=["int", "blank", "too long"])
    def test_bad_queue(self, refused: Any, queue: Any) -> None:
        refused(lambda: noop.using(queue=queue).enqueue(), match="queue")

    @pytest.mark.parametrize("key", [5, "", "k" * 256], ids=["int", "empty", "too long"])
    def test_bad_idempotency_key(self, refused: Any, key: Any) -> None:
        refused(lambda: noop.using(idempotency_key=key).enqueue(), match="idempotency_key")

    def test_idempotency_key_with_enqueue_many(self, refused: Any) -> None:
        refused(
            lambda: noop.using(idempotency_key="batch").enqueue_many([{"a": 1}]),
            match="idempotency_key",
        )

    def test_bad_option_fails_enqueue_many_too(self, refused: Any) -> None:
        refused(lambda: noop.using(priority=1000).enqueue_many([{"a": 1}]), match="priority")


class TestUnknownJob:
    def test_unknown_name(self, refused: Any) -> None:
        info = refused(lambda: enqueue("tests.no_such_job", 1), error=UnknownJobError)
        assert "tests.no_such_job" in str(info.value)
        assert "tests.noop" in str(info.value), "the message lists the registered names"

    def test_unknown_job_error_is_an_invalid_job_error(self) -> None:
        assert issubclass(UnknownJobError, InvalidJobError)
        assert issubclass(InvalidJobError, ValueError)


class TestHandlerOptions:
    """Options given to @job are checked when the module is imported, not at the first enqueue."""

    @pytest.mark.parametrize(
        ("options", "match"),
        [
            ({"priority": 101}, "priority"),
            ({"priority": "high"}, "priority"),
            ({"max_attempts": 0}, "max_attempts"),
            ({"timeout": 0}, "timeout"),
            ({"timeout": -timedelta(seconds=1)}, "timeout"),
            ({"backoff": -1}, "backoff"),
            ({"backoff": "fast"}, "backoff"),
            ({"queue": ""}, "queue"),
        ],
        ids=repr,
    )
    def test_bad_option_at_decoration(self, options: dict, match: str) -> None:
        with pytest.raises(InvalidJobError, match=match):
            job("tests.never_registered", **options)(lambda: None)
        from django_sqlqueue import registry

        assert "tests.never_registered" not in registry

    @pytest.mark.parametrize("name", ["", "   ", None, 5, "n" * 256], ids=repr)
    def test_bad_job_name(self, name: Any) -> None:
        with pytest.raises(InvalidJobError, match="Job name"):
            job(name)(lambda: None)


@pytest.mark.django_db(transaction=True)
def test_refused_enqueue_leaves_the_callers_transaction_usable(alias: str) -> None:
    """Validation runs before any SQL, so the caller can catch the error and go on."""
    with transaction.atomic(using=alias):
        Order.objects.using(alias).create(reference="before")
        with pytest.raises(InvalidJobError):
            noop.enqueue(when=dt.datetime.now())
        Order.objects.using(alias).create(reference="after")
        noop.enqueue("fine")
    assert Order.objects.using(alias).count() == 2
    assert Job.objects.using(alias).count() == 1


class TestExactComparison:
    """Queue names and idempotency keys compare exactly on every database."""

    def test_keys_differing_in_case_or_trailing_space_are_different(self, alias: str) -> None:
        first = noop.using(idempotency_key="Key").enqueue()
        second = noop.using(idempotency_key="key ").enqueue()
        assert not second.deduplicated
        assert first.pk != second.pk

    def test_a_queue_name_matches_only_itself(self, alias: str, claim: Any) -> None:
        noop.using(queue="MAIL").enqueue()
        assert claim("w", queues=["mail"]) == []
        assert len(claim("w", queues=["MAIL"])) == 1


class TestNamesAndQueues:
    @pytest.mark.parametrize("value", ["a\x00b", "\ud800"], ids=["nul", "surrogate"])
    def test_queue_and_key_text_is_checked(self, refused: Any, value: str) -> None:
        refused(lambda: noop.using(queue=value).enqueue(), match="queue cannot be stored")
        refused(
            lambda: noop.using(idempotency_key=value).enqueue(),
            match="idempotency_key cannot be stored",
        )

    def test_queue_with_a_comma_is_refused(self, refused: Any) -> None:
        refused(lambda: noop.using(queue="a,b").enqueue(), match="contains a comma")

    def test_nesting_deeper_than_mariadb_allows_is_refused(self, refused: Any) -> None:
        value: Any = "leaf"
        for _ in range(31):
            value = [value]
        refused(lambda: noop.enqueue(value), match="nesting deeper than 30")

    def test_run_at_at_the_end_of_time_west_of_utc_is_refused(self, refused: Any) -> None:
        west = dt.timezone(dt.timedelta(hours=-5))
        refused(
            lambda: noop.using(run_at=dt.datetime(9999, 12, 31, 23, 0, tzinfo=west)).enqueue(),
            match="out of the range",
        )
