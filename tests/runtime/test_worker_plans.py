"""Which worker processes a supervisor runs when queues have slots of their own
(runtime/worker_plans.py), how `--queues name:slots` and the QUEUES setting are read, and the
claim that leaves those queues to their own processes."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError
from django.utils import timezone

from django_sqlqueue.conf import QueueSettings
from django_sqlqueue.databases import queue_database
from django_sqlqueue.management.commands.runworkers import _queues
from django_sqlqueue.runtime.worker_options import WorkerOptions
from django_sqlqueue.runtime.worker_plans import plan_workers
from tests.testapp.jobs import noop


def shapes(plans) -> list[tuple[tuple[str, ...], tuple[str, ...], int, int]]:
    return [
        (tuple(p.options.queues), tuple(p.options.excluded), p.options.concurrency, p.count)
        for p in plans
    ]


def test_without_queues_of_their_own_all_workers_are_alike() -> None:
    options = WorkerOptions(queues=("a",), concurrency=4)
    assert shapes(plan_workers(3, options)) == [(("a",), (), 4, 3)]
    assert shapes(plan_workers(3, options, {"b": 10})) == [(("a",), (), 4, 3)], (
        "a queue not served is not planned"
    )


def test_each_queue_with_slots_gets_its_processes_and_the_rest_theirs() -> None:
    options = WorkerOptions(concurrency=5, burst=True)
    plans = plan_workers(2, options, {"webhooks": 50, "reports": 1})
    assert shapes(plans) == [
        (("webhooks",), (), 50, 2),
        (("reports",), (), 1, 2),
        ((), ("webhooks", "reports"), 5, 2),
    ]
    assert all(plan.options.burst for plan in plans), "the other options are kept"
    assert [plan.describe() for plan in plans] == [
        "2 x webhooks (50 slots each)",
        "2 x reports (1 slot each)",
        "2 x every queue but webhooks, reports (5 slots each)",
    ]


def test_named_queues_without_slots_share_the_other_processes() -> None:
    options = WorkerOptions(queues=("webhooks", "mail", "default"))
    assert shapes(plan_workers(1, options, {"webhooks": 20})) == [
        (("webhooks",), (), 20, 1),
        (("mail", "default"), (), 1, 1),
    ]
    only_own = WorkerOptions(queues=("webhooks",))
    assert shapes(plan_workers(1, only_own, {"webhooks": 20})) == [(("webhooks",), (), 20, 1)]


def test_excluded_queues_are_left_out_of_every_plan() -> None:
    """runworkers --exclude-queues reports: no process serves `reports`, not even one the
    QUEUES setting gives slots of its own."""
    options = WorkerOptions(excluded=("reports",), concurrency=2)
    assert shapes(plan_workers(2, options)) == [((), ("reports",), 2, 2)]
    plans = plan_workers(1, options, {"webhooks": 20, "reports": 5})
    assert shapes(plans) == [
        (("webhooks",), (), 20, 1),
        ((), ("reports", "webhooks"), 2, 1),
    ]
    assert plans[-1].describe() == "1 x every queue but reports, webhooks (2 slots each)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--queues", "mail", "--exclude-queues", "reports"), "do not combine"),
        (("--exclude-queues", " , "), "empty queue list"),
        (("--exclude-queues", "reports:2"), "take no slots"),
    ],
)
def test_bad_excluded_queues_get_a_one_line_error(args: tuple[str, ...], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        call_command("runworkers", *args, "--burst", "--skip-checks")


def test_the_command_line_reads_queues_and_their_slots() -> None:
    assert _queues("mail, default") == [("mail", None), ("default", None)]
    assert _queues("webhooks:50,reports:1,mail") == [
        ("webhooks", 50),
        ("reports", 1),
        ("mail", None),
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("a:0", "'a:0': a queue's slots must be an integer from 1 to 1000, as in webhooks:50"),
        ("a:1001", "from 1 to 1000"),
        ("a:x", "from 1 to 1000"),
        (":3", "':3' names no queue"),
        (",", "empty queue list"),
    ],
)
def test_bad_queue_slots_get_a_one_line_error(value: str, message: str) -> None:
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call_command("runworkers", "--queues", value, "--burst")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"a": 5}, """queue 'a' must map to {"concurrency": <slots>}, got 5."""),
        ({"a": {"concurrency": 0}}, "queue 'a': concurrency must be an integer from 1 to 1000"),
        ({"a": {"concurrency": 2, "x": 1}}, "queue 'a' must map to"),
        ([1], """must be a dict such as {"webhooks": {"concurrency": 50}}, got [1]."""),
        ({"a,b": {"concurrency": 1}}, "comma"),
    ],
)
def test_bad_queues_settings_name_the_setting(value: object, message: str) -> None:
    with pytest.raises(ImproperlyConfigured) as raised:
        QueueSettings({"QUEUES": value})
    assert str(raised.value).startswith("SQLQUEUE['QUEUES'] ")
    assert message in str(raised.value)


def test_concurrency_is_bounded() -> None:
    assert QueueSettings({"CONCURRENCY": 1000}).concurrency == 1000
    with pytest.raises(ImproperlyConfigured, match="from 1 to 1000, got 0"):
        QueueSettings({"CONCURRENCY": 0})


@pytest.mark.django_db
def test_a_claim_across_queues_leaves_the_excluded_ones_out(alias: str) -> None:
    """The other queues' processes claim from every queue but those with their own."""
    own = [noop.using(queue="webhooks").enqueue() for _ in range(3)]
    rest = [noop.using(queue=queue).enqueue() for queue in ("default", "mail")]
    claimer = queue_database(alias).claimer()
    claimed = claimer.claim("w1", None, 10, 60, timezone.now(), excluded=("webhooks",))
    assert sorted(job.id for job in claimed) == sorted(job.pk for job in rest)
    claimed = claimer.claim("w2", None, 10, 60, timezone.now())
    assert sorted(job.id for job in claimed) == sorted(job.pk for job in own)


@pytest.mark.django_db
def test_a_paused_queue_and_the_excluded_ones_are_both_left_out(alias: str) -> None:
    import django_sqlqueue

    noop.using(queue="webhooks").enqueue()
    noop.using(queue="mail").enqueue()
    ready = noop.using(queue="default").enqueue()
    django_sqlqueue.pause_queue("mail")
    claimer = queue_database(alias).claimer()
    claimed = claimer.claim("w1", None, 10, 60, timezone.now(), excluded=("webhooks",))
    assert [job.id for job in claimed] == [ready.pk]
