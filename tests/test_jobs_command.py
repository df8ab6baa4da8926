"""`manage.py jobs list|show|requeue|cancel|run-now|purge`, and `manage.py queues` alone,
run through call_command as an operator would run them."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_sqlqueue.management import job_display
from django_sqlqueue.management.commands import jobs as jobs_command
from django_sqlqueue.models import Job, JobBatch, JobDependency
from django_sqlqueue.states import Status

pytestmark = pytest.mark.django_db


class Terminal(io.StringIO):
    """Standard input as a person at a terminal gives it: what they will type."""

    def isatty(self) -> bool:
        return True


def run(*args: str, **options: Any) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out, **options)
    return out.getvalue().strip()


def ago(**delta: float) -> Any:
    return timezone.now() - timedelta(**delta)


def statuses(alias: str) -> dict[int, str]:
    return dict(Job.objects.using(alias).values_list("pk", "status"))


def listed_ids(output: str) -> list[int]:
    """The ids of `jobs list`'s lines (between the header and the count)."""
    return [int(line.split()[0]) for line in output.splitlines()[1:-1]]


@pytest.fixture
def mix(make_job: Any) -> dict[str, Job]:
    """A job in each status, in two queues, old and new."""
    return {
        "pending": make_job(status=Status.PENDING, run_at=timezone.now() + timedelta(hours=1)),
        "failed": make_job(status=Status.FAILED, queue="mail", attempts=1),
        "running": make_job(status=Status.RUNNING, name="tests.other", attempts=1),
        "dead": make_job(
            status=Status.DEAD,
            queue="mail",
            attempts=5,
            max_attempts=5,
            finished_at=ago(days=2),
            created_at=ago(days=3),
            last_error="ConnectionError: " + "x" * 200,
        ),
        "completed": make_job(status=Status.COMPLETED, finished_at=ago(hours=1), attempts=1),
        "cancelled": make_job(
            status=Status.CANCELLED, finished_at=ago(days=10), created_at=ago(days=10)
        ),
    }


class TestList:
    def test_newest_first_one_line_each_and_a_count(self, mix: dict[str, Job]) -> None:
        output = run("jobs", "list")
        lines = output.splitlines()
        assert lines[0].split()[:4] == ["ID", "NAME", "QUEUE", "STATUS"]
        assert listed_ids(output) == sorted((job.pk for job in mix.values()), reverse=True)
        assert lines[-1] == "6 shown of 6 jobs."
        dead = next(line for line in lines if line.startswith(f"{mix['dead'].pk} "))
        assert "mail" in dead and " dead " in dead and " 5/5 " in dead
        assert dead.endswith("ConnectionError: " + "x" * 62 + "…")  # 80 characters

    def test_limit(self, mix: dict[str, Job]) -> None:
        output = run("jobs", "list", "--limit", "2")
        assert listed_ids(output) == [mix["cancelled"].pk, mix["completed"].pk]
        assert output.splitlines()[-1] == "2 shown of 6 jobs."

    @pytest.mark.parametrize(
        ("args", "expected"),
        [
            (["--status", "dead"], ["dead"]),
            (["--status", "dead", "--status", "failed"], ["dead", "failed"]),
            (["--queue", "mail"], ["dead", "failed"]),
            (["--name", "tests.other"], ["running"]),
            (["--older-than", "2d"], ["dead", "cancelled"]),
            (["--older-than", "5d"], ["cancelled"]),
            (["--older-than", "216000"], ["dead", "cancelled"]),  # seconds: 2.5 days
            (["--queue", "mail", "--status", "failed"], ["failed"]),
        ],
        ids=" ".join,
    )
    def test_filters(self, mix: dict[str, Job], args: list[str], expected: list[str]) -> None:
        wanted = sorted((mix[key].pk for key in expected), reverse=True)
        assert listed_ids(run("jobs", "list", *args)) == wanted

    def test_ids_repeated_or_comma_separated(self, mix: dict[str, Job]) -> None:
        a, b, c = mix["pending"].pk, mix["dead"].pk, mix["running"].pk
        output = run("jobs", "list", "--id", f"{a},{b}", "--id", str(c))
        assert listed_ids(output) == sorted([a, b, c], reverse=True)

    def test_json(self, mix: dict[str, Job]) -> None:
        data = json.loads(run("jobs", "list", "--json", "--queue", "mail"))
        assert (data["count"], data["capped"]) == (2, False)
        assert [row["id"] for row in data["jobs"]] == [mix["dead"].pk, mix["failed"].pk]
        dead = data["jobs"][0]
        assert dead["status"] == "dead" and dead["attempts"] == 5 and dead["max_attempts"] == 5
        assert dead["last_error"].startswith("ConnectionError: ")
        assert dead["finished_at"] and data["jobs"][1]["finished_at"] is None

    def test_the_count_stops_at_the_cap(
        self, mix: dict[str, Job], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(job_display, "COUNT_CAP", 3)
        assert run("jobs", "list", "--limit", "2").splitlines()[-1] == (
            "2 shown of more than 3 jobs."
        )
        data = json.loads(run("jobs", "list", "--limit", "2", "--json"))
        assert (len(data["jobs"]), data["count"], data["capped"]) == (2, 3, True)

    def test_nothing(self, mix: dict[str, Job], db: None) -> None:
        assert run("jobs", "list", "--queue", "nope") == "No jobs match."
        assert json.loads(run("jobs", "list", "--queue", "nope", "--json")) == {
            "jobs": [],
            "count": 0,
            "capped": False,
        }
        Job.objects.all().delete()
        assert run("jobs", "list") == "No jobs."


class TestShow:
    def test_every_field_history_batch_and_dependencies(self, make_job: Any, alias: str) -> None:
        batch = JobBatch.objects.using(alias).create(label="nightly")
        before = make_job(status=Status.COMPLETED, finished_at=ago(minutes=5))
        job = make_job(
            status=Status.DEAD,
            queue="mail",
            args=[1, "two"],
            kwargs={"to": "ada@example.com"},
            result={"sent": False},
            attempts=2,
            max_attempts=2,
            last_error="SMTPError: refused\nsecond line",
            batch=batch,
            history=[
                {
                    "attempt": 1,
                    "worker": "web-1:1:aa",
                    "started_at": ago(minutes=2).isoformat(),
                    "finished_at": ago(minutes=1).isoformat(),
                    "outcome": "error",
                    "error": "SMTPError: busy",
                    "traceback": "Traceback (most recent call last):\nSMTPError: busy",
                    "exception": "smtplib.SMTPError",
                }
            ],
        )
        after = make_job(status=Status.WAITING, name="tests.other")
        JobDependency.objects.using(alias).create(job=job, depends_on=before, done=True)
        JobDependency.objects.using(alias).create(job=after, depends_on=job)

        lines = run("jobs", "show", str(job.pk)).splitlines()
        text = "\n".join(lines)
        assert lines[0] == f"Job {job.pk}: tests.noop"
        for expected in (
            "  status:              dead",
            "  queue:               mail",
            "  attempts:            2",
            f"  batch_id:            {batch.pk} (nightly)",
            '  args:                [1, "two"]',
            '  kwargs:              {"to": "ada@example.com"}',
            '  result:              {"sent": false}',
            "    SMTPError: refused",
            "    second line",
            "Waits for:",
            f"  job {before.pk} tests.noop (completed)",
            "Waited for by:",
            f"  job {after.pk} tests.other (waiting)",
        ):
            assert expected in lines, expected
        assert "History (1 entry; -v 2 adds the tracebacks):" in lines
        assert "attempt 1 on web-1:1:aa" in text and ": error (SMTPError: busy)" in text
        assert "Traceback (most recent call last):" not in text
        verbose = run("jobs", "show", str(job.pk), verbosity=2)
        assert "Traceback (most recent call last):" in verbose

    def test_json(self, make_job: Any, alias: str) -> None:
        before = make_job(status=Status.COMPLETED)
        job = make_job(status=Status.WAITING, kwargs={"n": 1})
        JobDependency.objects.using(alias).create(job=job, depends_on=before, run_on_failure=True)
        data = json.loads(run("jobs", "show", str(job.pk), "--json"))
        assert set(data) == {"job", "batch", "waits_for", "waited_for_by"}
        assert data["job"]["id"] == job.pk and data["job"]["kwargs"] == {"n": 1}
        assert {"history", "last_error", "result", "args", "batch_id", "run_at"} <= set(data["job"])
        assert data["batch"] is None
        assert data["waits_for"] == {
            "jobs": [
                {
                    "id": before.pk,
                    "name": "tests.noop",
                    "status": "completed",
                    "runs_if_it_fails": True,
                }
            ],
            "more": False,
        }
        assert data["waited_for_by"] == {"jobs": [], "more": False}

    def test_a_job_without_anything(self, make_job: Any) -> None:
        job = make_job()
        lines = run("jobs", "show", str(job.pk)).splitlines()
        assert "History: no attempt yet." in lines
        assert "Waits for: no job." in lines and "Waited for by: no job." in lines

    @pytest.mark.parametrize(
        ("value", "match"), [("999999", "No job 999999."), ("x", "not a job id")]
    )
    def test_unknown_or_bad_id(self, db: None, value: str, match: str) -> None:
        with pytest.raises(CommandError, match=match):
            run("jobs", "show", value)


class TestOperations:
    def test_requeue(self, mix: dict[str, Job], alias: str) -> None:
        output = run("jobs", "requeue", "--queue", "mail", "--yes")
        assert output == "Requeued 2 jobs."
        dead = Job.objects.using(alias).get(pk=mix["dead"].pk)
        assert (dead.status, dead.attempts, dead.finished_at) == (Status.PENDING, 0, None)
        assert statuses(alias)[mix["failed"].pk] == Status.PENDING
        assert statuses(alias)[mix["cancelled"].pk] == Status.CANCELLED  # another queue

    def test_cancel_asks_running_jobs_to_stop(self, mix: dict[str, Job], alias: str) -> None:
        ids = f"{mix['pending'].pk},{mix['running'].pk},{mix['dead'].pk}"
        assert run("jobs", "cancel", "--id", ids, "--dry-run") == (
            "Would cancel 1 job; 1 running job would be asked to stop "
            f"(status waiting/pending/failed/running, with id {ids.replace(',', ', ')})."
        )
        assert run("jobs", "cancel", "--id", ids, "--yes") == (
            "Cancelled 1 job; 1 running job asked to stop."
        )
        after = statuses(alias)
        assert after[mix["pending"].pk] == Status.CANCELLED
        assert after[mix["dead"].pk] == Status.DEAD
        running = Job.objects.using(alias).get(pk=mix["running"].pk)
        assert running.status == Status.RUNNING and running.cancel_requested_at is not None
        # Asked once: a second run has nothing left to do.
        assert run("jobs", "cancel", "--id", ids, "--yes").startswith("No jobs to cancel")

    def test_run_now(self, mix: dict[str, Job], alias: str) -> None:
        assert run("jobs", "run-now", "--status", "pending", "--yes") == "Made 1 job due now."
        assert Job.objects.using(alias).get(pk=mix["pending"].pk).run_at <= timezone.now()

    def test_purge_by_finish_time(self, mix: dict[str, Job], alias: str) -> None:
        # created 3 days ago, finished 2 days ago; cancelled: both 10 days ago.
        assert run("jobs", "purge", "--older-than", "5d", "--yes") == "Purged 1 job."
        assert mix["cancelled"].pk not in statuses(alias)
        assert run("jobs", "purge", "--older-than", "1d", "--yes") == "Purged 1 job."
        assert mix["dead"].pk not in statuses(alias)
        assert run("jobs", "purge", "--status", "completed", "--yes") == "Purged 1 job."
        assert set(statuses(alias).values()) == {Status.PENDING, Status.FAILED, Status.RUNNING}

    def test_purge_keeps_a_job_another_waits_for(self, make_job: Any, alias: str) -> None:
        needed = make_job(status=Status.COMPLETED, finished_at=ago(days=1))
        waiting = make_job(status=Status.WAITING)
        JobDependency.objects.using(alias).create(job=waiting, depends_on=needed, done=True)
        assert run("jobs", "purge", "--status", "completed", "--yes").startswith("No jobs to ")
        assert needed.pk in statuses(alias)

    @pytest.mark.parametrize(
        ("args", "said"),
        [
            (["requeue", "--queue", "mail"], "Would requeue 2 jobs (status "),
            (["cancel", "--status", "pending"], "Would cancel 1 job (status pending)."),
            (["run-now", "--queue", "default"], "Would make 1 job due now (status "),
            (["purge", "--older-than", "1d"], "Would purge 2 jobs (status "),
        ],
        ids=["requeue", "cancel", "run-now", "purge"],
    )
    def test_dry_run_changes_nothing(
        self, mix: dict[str, Job], alias: str, args: list[str], said: str
    ) -> None:
        before = (
            Job.objects.using(alias)
            .order_by("pk")
            .values_list("pk", "status", "run_at", "attempts", "cancel_requested_at")
        )
        expected = list(before)
        assert run("jobs", *args, "--dry-run").startswith(said)
        assert list(before.all()) == expected

    @pytest.mark.parametrize("action", ["requeue", "cancel", "run-now", "purge"])
    def test_refuses_without_a_filter(self, mix: dict[str, Job], alias: str, action: str) -> None:
        before = statuses(alias)
        with pytest.raises(CommandError, match="needs at least one filter"):
            run("jobs", action, "--yes")
        with pytest.raises(CommandError, match="needs at least one filter"):
            run("jobs", action, "--dry-run")
        assert statuses(alias) == before

    def test_refuses_without_yes_when_nobody_can_be_asked(
        self, mix: dict[str, Job], alias: str
    ) -> None:
        before = statuses(alias)
        with pytest.raises(CommandError, match=r"Requeue 2 jobs .*Add --yes to go ahead"):
            run("jobs", "requeue", "--queue", "mail", stdin=io.StringIO("y\n"))
        assert statuses(alias) == before

    def test_asks_at_a_terminal(self, mix: dict[str, Job], alias: str) -> None:
        before = statuses(alias)
        output = run("jobs", "requeue", "--queue", "mail", stdin=Terminal("n\n"))
        assert output.startswith("Requeue 2 jobs (status dead/cancelled/failed/completed, in ")
        assert output.endswith("? [y/N] Nothing changed.")
        assert statuses(alias) == before
        output = run("jobs", "requeue", "--queue", "mail", stdin=Terminal("y\n"))
        assert output.endswith("? [y/N] Requeued 2 jobs.")
        assert statuses(alias)[mix["dead"].pk] == Status.PENDING

    @pytest.mark.parametrize(
        ("action", "status"),
        [("requeue", "pending"), ("cancel", "dead"), ("run-now", "running"), ("purge", "failed")],
    )
    def test_a_status_the_operation_never_changes_is_refused(
        self, mix: dict[str, Job], alias: str, action: str, status: str
    ) -> None:
        before = statuses(alias)
        with pytest.raises(CommandError, match=f"{action} applies to .* jobs, not {status}"):
            run("jobs", action, "--status", status, "--yes")
        assert statuses(alias) == before

    def test_silent_at_verbosity_0(self, mix: dict[str, Job], alias: str) -> None:
        assert run("jobs", "requeue", "--queue", "mail", "--yes", verbosity=0) == ""
        assert statuses(alias)[mix["dead"].pk] == Status.PENDING

    def test_a_large_selection_goes_in_chunks_of_1000(self, db: None, alias: str) -> None:
        Job.objects.using(alias).bulk_create(
            Job(name="tests.noop", status=Status.DEAD, attempts=5, queue="bulk")
            for _ in range(2500)
        )
        with CaptureQueriesContext(connections[alias]) as queries:
            output = run("jobs", "requeue", "--queue", "bulk", "--yes")
        assert output == "Requeued 2500 jobs."
        counts = Job.objects.using(alias).filter(queue="bulk").values_list("status", "attempts")
        assert set(counts) == {(Status.PENDING, 0)}
        updates = [
            q["sql"]
            for q in queries
            if q["sql"].lstrip().upper().startswith("UPDATE")
            and q["sql"].split()[1].strip('"`') == "django_sqlqueue_job"
        ]
        assert len(updates) == 3  # 1000 + 1000 + 500

    def test_counts_past_the_cap_say_more_than(
        self, mix: dict[str, Job], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setattr(jobs_command, "COUNT_CAP", 2)
        assert run("jobs", "cancel", "--queue", "default", "--dry-run").startswith(
            "Would cancel 1 job; 1 running job would be asked to stop"
        )
        assert run("jobs", "purge", "--older-than", "0", "--dry-run").startswith(
            "Would purge more than 2 jobs"
        )


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["list", "--older-than", "soon"], "'soon' is not a duration"),
        (["list", "--older-than", "3y"], "'3y' is not a duration"),
        (["list", "--older-than=-5m"], "'-5m' is not a duration"),
        (["list", "--older-than", "99999d"], "too long"),
        (["list", "--id", "a"], "'a' is not a job id"),
        (["list", "--id", "0"], "ids start at 1"),
        (["list", "--id", "1,,x"], "'x' is not a job id"),
        (["list", "--id", ","], "not a job id"),
        (["list", "--status", "asleep"], "invalid choice"),
        (["list", "--queue", "a\x00b"], "NUL"),
        (["list", "--name", "n" * 300], "the limit is 255"),
        (["list", "--limit", "0"], "at least 1"),
        (["list", "--limit", "10001"], "too large"),
        (["requeue", "--id", ",".join(str(i) for i in range(1, 1002))], "the most is 1000"),
        (["show"], "the following arguments are required: ID"),
        ([], "the following arguments are required: ACTION"),
        (["frobnicate"], "invalid choice"),
    ],
    ids=[
        "duration word",
        "duration unit",
        "negative duration",
        "duration too long",
        "id word",
        "id zero",
        "id in list",
        "id empty",
        "status",
        "queue NUL",
        "name too long",
        "limit zero",
        "limit too large",
        "too many ids",
        "show without id",
        "no action",
        "unknown action",
    ],
)
def test_bad_input_is_one_line(mix: dict[str, Job], alias: str, args: list[str], match: str):
    before = statuses(alias)
    with pytest.raises(CommandError, match=match):
        run("jobs", *args)
    assert statuses(alias) == before


def test_queues_alone_lists_the_queues(mix: dict[str, Job]) -> None:
    listed = run("queues")
    assert listed == run("queues", "list")
    assert listed.splitlines()[0].startswith("default: active; pending: 1, running: 1")
    assert json.loads(run("queues", "list", "--json"))["queues"]
