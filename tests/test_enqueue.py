"""Enqueueing: defaults, per-call options, by name, in bulk, and inside the caller's transaction."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import DatabaseError, connections, transaction
from django.db.transaction import TransactionManagementError
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import django_sqlqueue
from django_sqlqueue import InvalidJobError, Status, enqueue
from django_sqlqueue.databases import queue_database
from django_sqlqueue.databases.driver import watched
from django_sqlqueue.models import Job
from tests.testapp.jobs import add, fail_always, limited, noop
from tests.testapp.models import Order

pytestmark = pytest.mark.django_db


def stored(alias: str) -> list[Job]:
    return list(Job.objects.using(alias).order_by("id"))


class TestEnqueue:
    def test_returns_the_saved_job_with_setting_defaults(self, alias: str) -> None:
        before = timezone.now()
        job = noop.enqueue(1, "two", flag=True)
        after = timezone.now()

        assert job.pk is not None
        assert job.deduplicated is False
        row = Job.objects.using(alias).get(pk=job.pk)
        assert row.name == "tests.noop"
        assert row.args == [1, "two"]
        assert row.kwargs == {"flag": True}
        assert row.status == Status.PENDING
        assert row.queue == "default"
        assert row.priority == 0
        assert row.max_attempts == 5
        assert row.attempts == 0
        assert row.idempotency_key is None
        assert row.lease_owner == ""
        assert row.history == []
        assert before <= row.run_at <= after
        assert before <= row.created_at <= after

    def test_handler_options_are_the_defaults(self, register_job: Any, alias: str) -> None:
        handler = register_job("tests.configured", queue="mail", priority=7, max_attempts=9)
        row = Job.objects.using(alias).get(pk=handler.enqueue(to="a@example.com").pk)
        assert (row.queue, row.priority, row.max_attempts) == ("mail", 7, 9)
        assert row.kwargs == {"to": "a@example.com"}

    def test_handler_max_attempts_from_jobs_py(self, alias: str) -> None:
        assert Job.objects.using(alias).get(pk=fail_always.enqueue().pk).max_attempts == 3

    def test_settings_supply_what_the_handler_leaves_out(self, settings: Any, alias: str) -> None:
        settings.SQLQUEUE = {
            **settings.SQLQUEUE,
            "DEFAULT_QUEUE": "bulk",
            "DEFAULT_PRIORITY": -3,
            "MAX_ATTEMPTS": 11,
        }
        row = Job.objects.using(alias).get(pk=noop.enqueue().pk)
        assert (row.queue, row.priority, row.max_attempts) == ("bulk", -3, 11)

    def test_using_overrides_everything(self, register_job: Any, alias: str) -> None:
        handler = register_job("tests.configured", queue="mail", priority=7, max_attempts=9)
        run_at = timezone.now() + timedelta(hours=2)
        job = handler.using(
            queue="urgent", priority=-50, max_attempts=1, run_at=run_at, idempotency_key="k-1"
        ).enqueue("x")
        row = Job.objects.using(alias).get(pk=job.pk)
        assert (row.queue, row.priority, row.max_attempts) == ("urgent", -50, 1)
        assert row.run_at == run_at
        assert row.idempotency_key == "k-1"
        assert row.args == ["x"]

    def test_using_can_be_chained(self, alias: str) -> None:
        job = noop.using(queue="a", priority=3).using(priority=4).enqueue()
        row = Job.objects.using(alias).get(pk=job.pk)
        assert (row.queue, row.priority) == ("a", 4)

    def test_using_does_not_change_the_handler(self, alias: str) -> None:
        noop.using(queue="elsewhere", priority=9)
        row = Job.objects.using(alias).get(pk=noop.enqueue().pk)
        assert (row.queue, row.priority) == ("default", 0)

    @pytest.mark.parametrize(
        "delay", [timedelta(minutes=5), 300, 300.0], ids=["timedelta", "int", "float"]
    )
    def test_delay_moves_run_at(self, delay: Any, alias: str) -> None:
        before = timezone.now()
        job = noop.using(delay=delay).enqueue()
        after = timezone.now()
        run_at = Job.objects.using(alias).get(pk=job.pk).run_at
        assert before + timedelta(minutes=5) <= run_at <= after + timedelta(minutes=5)

    def test_direct_call_runs_the_function_and_stores_nothing(self, alias: str) -> None:
        assert add(2, 3) == 5
        assert add(a="x", b="y") == "xy"
        assert stored(alias) == []

    def test_handler_keeps_the_function_identity(self) -> None:
        assert add.__name__ == "add"
        assert add.__module__ == "tests.testapp.jobs"
        assert add.name == "tests.add"


class TestEnqueueByName:
    def test_enqueue_by_name(self, alias: str) -> None:
        job = enqueue("tests.add", 2, b=3)
        row = Job.objects.using(alias).get(pk=job.pk)
        assert (row.name, row.args, row.kwargs) == ("tests.add", [2], {"b": 3})

    def test_package_level_enqueue_is_the_same(self, alias: str) -> None:
        job = django_sqlqueue.enqueue("tests.noop", "x")
        assert Job.objects.using(alias).get(pk=job.pk).args == ["x"]

    def test_by_name_uses_the_handler_defaults(self, alias: str) -> None:
        assert Job.objects.using(alias).get(pk=enqueue("tests.fail_always").pk).max_attempts == 3


class TestEnqueueMany:
    def test_one_job_per_dict(self, alias: str) -> None:
        jobs = add.enqueue_many([{"a": 1, "b": 2}, {"a": 3, "b": 4}])
        assert len(jobs) == 2
        assert all(job.pk is not None for job in jobs)
        rows = stored(alias)
        assert [job.pk for job in jobs] == [row.pk for row in rows]
        assert [row.kwargs for row in rows] == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
        assert {row.name for row in rows} == {"tests.add"}
        assert {row.status for row in rows} == {Status.PENDING}

    def test_with_options(self, alias: str) -> None:
        add.using(queue="math", priority=5).enqueue_many([{"a": 1, "b": 1}] * 3)
        rows = stored(alias)
        assert [(row.queue, row.priority) for row in rows] == [("math", 5)] * 3

    def test_accepts_any_iterable(self, alias: str) -> None:
        add.enqueue_many({"a": n, "b": n} for n in range(4))
        assert len(stored(alias)) == 4

    def test_inserts_in_one_statement(self, alias: str) -> None:
        with CaptureQueriesContext(connections[alias]) as queries:
            jobs = noop.enqueue_many([{"n": n} for n in range(50)])
        inserts = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith("INSERT")]
        assert len(inserts) == 1
        assert len(jobs) == 50
        assert len(stored(alias)) == 50

    def test_returned_jobs_match_their_rows_across_statements(self, alias: str) -> None:
        """12,000 jobs span several INSERT statements on every database; each returned job
        must be its own row, field for field, as a fresh read gives it."""
        jobs = noop.enqueue_many([{"n": n, "text": f"job {n}"} for n in range(12_000)])
        rows = {row.pk: row for row in Job.objects.using(alias).all()}
        assert len(rows) == 12_000
        assert [job.kwargs["n"] for job in jobs] == list(range(12_000))
        fields = [f.attname for f in Job._meta.concrete_fields]
        for job in jobs[::997] + jobs[-3:]:
            row = rows[job.pk]
            assert {f: getattr(job, f) for f in fields} == {f: getattr(row, f) for f in fields}
            assert job._state.adding is False
            assert job._state.db == alias

    def test_awkward_values_round_trip(self, alias: str) -> None:
        items: list[dict[str, Any]] = [
            {"text": "quotes ' \" and \\ backslash, $1 %s %(x)s {} [] ,;"},
            {"text": "unicode é 漢字 🎉 \u2028", "none": None, "flag": False},
            {"big": 2**63 - 1, "small": -(2**63), "float": 0.1, "neg": -1.5e-7},
            {"nested": {"a": [1, [2, [3, {"b": None}]]], "empty": {}, "list": []}},
        ]
        jobs = noop.using(delay=timedelta(seconds=90)).enqueue_many(items)
        for job, item in zip(jobs, items, strict=True):
            row = Job.objects.using(alias).get(pk=job.pk)
            assert row.kwargs == item == job.kwargs
            assert row.run_at == job.run_at
            assert row.run_at - row.created_at == timedelta(seconds=90)

    def test_init_signal_receivers_see_every_returned_job(self, alias: str) -> None:
        from django.db.models.signals import post_init

        seen: list[Job] = []

        def receiver(sender: type[Job], instance: Job, **kwargs: Any) -> None:
            seen.append(instance)

        post_init.connect(receiver, sender=Job)
        try:
            jobs = noop.enqueue_many([{"n": n} for n in range(3)])
        finally:
            post_init.disconnect(receiver, sender=Job)
        assert [id(job) for job in jobs] == [id(job) for job in seen]
        assert [job.pk for job in jobs] == [row.pk for row in stored(alias)]

    def test_empty_list_stores_nothing(self, alias: str) -> None:
        assert noop.enqueue_many([]) == []
        assert stored(alias) == []

    def test_a_bad_item_stores_nothing(self, alias: str) -> None:
        items = [{"a": 1}, {"a": 2}, {"a": object()}, {"a": 4}]
        with pytest.raises(InvalidJobError, match=r"item 2.*a.*object"):
            noop.enqueue_many(items)
        assert stored(alias) == []

    def test_an_item_that_is_not_a_dict_stores_nothing(self, alias: str) -> None:
        with pytest.raises(InvalidJobError, match=r"item 1 is a list"):
            noop.enqueue_many([{"a": 1}, [1, 2]])
        assert stored(alias) == []

    def test_an_item_with_non_string_keys_stores_nothing(self, alias: str) -> None:
        """Keyword arguments are names: `{1: "x"}` would come back as `{"1": "x"}`."""
        with pytest.raises(InvalidJobError, match="item 1"):
            noop.enqueue_many([{"a": 1}, {1: "x"}])
        assert stored(alias) == []


@pytest.mark.django_db(transaction=True)
class TestTransactionalEnqueue:
    """The job commits or rolls back with the caller's own writes."""

    def test_rollback_leaves_no_job(self, alias: str) -> None:
        with pytest.raises(RuntimeError, match="view failed"), transaction.atomic(using=alias):
            Order.objects.using(alias).create(reference="A-1")
            noop.enqueue(order="A-1")
            assert Job.objects.using(alias).count() == 1
            raise RuntimeError("view failed")
        assert Order.objects.using(alias).count() == 0
        assert Job.objects.using(alias).count() == 0

    def test_commit_keeps_both(self, alias: str) -> None:
        with transaction.atomic(using=alias):
            order = Order.objects.using(alias).create(reference="A-2")
            job = noop.enqueue(order=order.pk)
        assert Order.objects.using(alias).filter(reference="A-2").exists()
        assert Job.objects.using(alias).get(pk=job.pk).kwargs == {"order": order.pk}

    def test_rollback_of_a_savepoint_drops_only_its_jobs(self, alias: str) -> None:
        with transaction.atomic(using=alias):
            kept = noop.enqueue("outer")
            with pytest.raises(RuntimeError), transaction.atomic(using=alias):
                noop.enqueue("inner")
                raise RuntimeError
        assert [row.pk for row in stored(alias)] == [kept.pk]

    def test_bulk_enqueue_rolls_back_too(self, alias: str) -> None:
        with pytest.raises(RuntimeError), transaction.atomic(using=alias):
            noop.enqueue_many([{"n": 1}, {"n": 2}])
            raise RuntimeError
        assert stored(alias) == []

    def test_other_connections_see_the_job_only_after_commit(
        self, alias: str, in_other_thread: Any
    ) -> None:
        def visible_elsewhere() -> bool:
            return Job.objects.using(alias).filter(name="tests.noop").exists()

        with transaction.atomic(using=alias):
            Order.objects.using(alias).create(reference="A-3")
            noop.enqueue()
            assert not in_other_thread(visible_elsewhere)
        assert in_other_thread(visible_elsewhere)

    def test_enqueue_outside_a_transaction_is_committed_at_once(
        self, alias: str, in_other_thread: Any
    ) -> None:
        job = noop.enqueue()
        assert in_other_thread(lambda: Job.objects.using(alias).filter(pk=job.pk).exists())


def own_connection_params(connection: Any) -> dict[str, Any]:
    """Django's parameters for a PostgreSQL connection, less what only Django's own
    connections take (its cursor class, adapters context, prepare threshold): for a second,
    plain psycopg connection to the same database."""
    params = connection.get_connection_params()
    for name in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(name, None)
    return dict(params)


def drop_on_the_server(connection: Any, vendor: str) -> None:
    """End `connection`'s session from another connection, as a server restart or an idle
    timeout would, and return once the server no longer lists it."""
    if vendor == "postgresql":
        import psycopg

        session = connection.connection.info.backend_pid
        with psycopg.connect(**own_connection_params(connection), autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", [session])
            while other.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [session]
            ).fetchone() != (0,):
                time.sleep(0.01)
        return
    import MySQLdb

    session = connection.connection.thread_id()
    other = MySQLdb.connect(**connection.get_connection_params())
    try:
        cursor = other.cursor()
        cursor.execute(f"KILL {int(session)}")
        while True:
            cursor.execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s", [session]
            )
            if cursor.fetchone() == (0,):
                break
            time.sleep(0.01)
    finally:
        other.close()


@pytest.mark.django_db(transaction=True)
class TestTheInsertsDriverPath:
    """A plain enqueue's INSERT runs on the driver's cursor (databases/driver.py), except while
    something watches the connection's queries; either way it behaves as Django's cursor."""

    def test_the_query_log_sees_the_insert(self, alias: str) -> None:
        with CaptureQueriesContext(connections[alias]) as queries:
            job = noop.enqueue(n=1)
        [insert] = [q["sql"] for q in queries if q["sql"].lstrip().upper().startswith("INSERT")]
        assert "django_sqlqueue_job" in insert
        assert Job.objects.using(alias).get(pk=job.pk).kwargs == {"n": 1}

    def test_an_execute_wrapper_sees_the_insert(self, alias: str) -> None:
        seen: list[str] = []

        def wrapper(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            seen.append(sql)
            return execute(sql, params, many, context)

        with connections[alias].execute_wrapper(wrapper):
            noop.enqueue(n=2)
        assert [sql for sql in seen if sql.lstrip().upper().startswith("INSERT")]

    def test_unwatched_it_stores_the_job_and_returns_its_id(self, alias: str) -> None:
        assert not watched(connections[alias])
        first, second = noop.enqueue("é", n=3), noop.enqueue(n=4)
        assert second.pk > first.pk
        rows = {row.pk: (row.args, row.kwargs) for row in stored(alias)}
        assert rows == {first.pk: (["é"], {"n": 3}), second.pk: ([], {"n": 4})}

    def test_with_health_checks_a_dropped_connection_is_replaced_first(
        self, alias: str, vendor: str
    ) -> None:
        """With CONN_HEALTH_CHECKS, Django's cursor tests a persistent connection before a
        request's first statement and replaces one the server dropped; an enqueue that is
        that first statement does the same, instead of failing on the dead one."""
        if vendor == "sqlite":
            pytest.skip("no server can drop a SQLite connection")
        connection = connections[alias]
        connection.ensure_connection()
        drop_on_the_server(connection, vendor)
        enabled = connection.health_check_enabled
        connection.health_check_enabled, connection.health_check_done = True, False
        try:
            job = noop.enqueue(n=6)
        finally:
            connection.health_check_enabled = enabled
        assert Job.objects.using(alias).filter(pk=job.pk).exists()

    def test_a_transaction_marked_for_rollback_refuses_it_as_django_does(self, alias: str) -> None:
        """Django's cursor refuses any statement in an atomic block an error broke; so does
        the enqueue: the caller hears it at once, rather than losing the job unseen."""
        with transaction.atomic(using=alias):
            Order.objects.using(alias).create(reference="B-1")
            transaction.set_rollback(True, using=alias)
            with pytest.raises(TransactionManagementError):
                noop.enqueue(order="B-1")
        assert stored(alias) == []
        assert Order.objects.using(alias).count() == 0

    def test_a_database_error_comes_out_as_djangos(self, alias: str) -> None:
        """The driver's exception, translated as Django's cursor translates it, leaves the
        caller's transaction as Django would: usable after a savepoint's rollback."""
        inserter = queue_database(alias).inserter()
        broken = inserter.one_driver_sql.replace("django_sqlqueue_job", "no_such_table", 1)
        good_sql = inserter.one_driver_sql
        inserter.one_driver_sql = broken
        try:
            with transaction.atomic(using=alias):
                with pytest.raises(DatabaseError), transaction.atomic(using=alias):
                    noop.enqueue(n=5)
                Order.objects.using(alias).create(reference="B-2")
        finally:
            inserter.one_driver_sql = good_sql
        assert Order.objects.using(alias).filter(reference="B-2").exists()
        assert stored(alias) == []


@pytest.mark.django_db(transaction=True)
class TestNotify:
    """PostgreSQL wakes idle workers with one NOTIFY per queue, sent only on commit."""

    @pytest.fixture
    def listener(self, alias: str, vendor: str) -> Any:
        if vendor != "postgresql":
            pytest.skip("LISTEN/NOTIFY exists only on PostgreSQL")
        import psycopg

        from django_sqlqueue.databases.postgresql import CHANNEL

        with psycopg.connect(**own_connection_params(connections[alias]), autocommit=True) as conn:
            conn.execute(f"LISTEN {CHANNEL}")

            def received() -> list[str]:
                return sorted(n.payload for n in conn.notifies(timeout=0.5, stop_after=None))

            yield received

    def test_commit_notifies_each_queue_once(self, listener: Any, alias: str) -> None:
        with transaction.atomic(using=alias):
            noop.using(queue="mail").enqueue()
            noop.using(queue="mail").enqueue()
            noop.using(queue="reports").enqueue_many([{"n": 1}, {"n": 2}])
        assert listener() == ["mail", "reports"]

    def test_rollback_notifies_nobody(self, listener: Any, alias: str) -> None:
        with pytest.raises(RuntimeError), transaction.atomic(using=alias):
            noop.enqueue()
            raise RuntimeError
        assert listener() == []

    def test_autocommit_enqueue_notifies(self, listener: Any) -> None:
        noop.enqueue()
        assert listener() == ["default"]

    def test_waking_a_job_held_back_for_a_slot_notifies_its_queue(
        self, listener: Any, alias: str
    ) -> None:
        """A job woken for a freed concurrency slot is due now: idle workers hear of it."""
        for _ in range(3):
            limited.using(queue="slots").enqueue(account="notify")
        w1, w2 = (queue_database(alias).claimer() for _ in range(2))
        [first] = w1.claim("w1", None, 10, 60, timezone.now())
        assert len(w2.claim("w2", None, 10, 60, timezone.now())) == 1  # the key is full
        listener()  # the enqueues' and hand-backs' notifications
        Job.objects.using(alias).filter(pk=first.id).update(status=Status.COMPLETED)
        assert w1.free_slot(first.id)
        assert listener() == ["slots"]
