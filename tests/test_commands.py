"""`purgejobs` and `jobstatus`, run through call_command as an operator would run them."""

from __future__ import annotations

import io
import json
import math
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.db import connections
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_sqlqueue.models import Job
from django_sqlqueue.states import Status

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip()


def days_ago(days: float) -> Any:
    return timezone.now() - timedelta(days=days)


def remaining(alias: str) -> set[int]:
    return set(Job.objects.using(alias).values_list("pk", flat=True))


class TestPurgeJobs:
    @pytest.fixture
    def history(self, make_job: Any) -> dict[str, Job]:
        """Finished and unfinished jobs, old and recent, in two queues."""
        old, recent = days_ago(10), days_ago(1)
        return {
            "completed_old": make_job(status=Status.COMPLETED, finished_at=old),
            "completed_recent": make_job(status=Status.COMPLETED, finished_at=recent),
            "dead_old": make_job(status=Status.DEAD, finished_at=old),
            "cancelled_old": make_job(status=Status.CANCELLED, finished_at=old),
            "completed_old_mail": make_job(status=Status.COMPLETED, finished_at=old, queue="mail"),
            # Never purged, however old: they still have work to do.
            "pending_old": make_job(status=Status.PENDING, finished_at=old, run_at=old),
            "failed_old": make_job(status=Status.FAILED, finished_at=old, run_at=old),
            "running_old": make_job(status=Status.RUNNING, finished_at=old, run_at=old),
            # A finished job with no finish time is not known to be old.
            "completed_undated": make_job(status=Status.COMPLETED, finished_at=None),
        }

    def test_deletes_only_finished_jobs_older_than_the_cutoff(
        self, history: dict[str, Job], alias: str
    ) -> None:
        output = run("purgejobs", "--days", "7")
        assert output.startswith("Deleted 4 completed/dead/cancelled jobs finished before ")
        deleted = {"completed_old", "dead_old", "cancelled_old", "completed_old_mail"}
        assert remaining(alias) == {job.pk for n, job in history.items() if n not in deleted}

    def test_status_filter(self, history: dict[str, Job], alias: str) -> None:
        output = run("purgejobs", "--days", "7", "--status", "dead", "--status", "cancelled")
        assert output.startswith("Deleted 2 dead/cancelled jobs")
        assert history["dead_old"].pk not in remaining(alias)
        assert history["cancelled_old"].pk not in remaining(alias)
        assert history["completed_old"].pk in remaining(alias)

    def test_queue_filter(self, history: dict[str, Job], alias: str) -> None:
        output = run("purgejobs", "--days", "7", "--queue", "mail")
        assert output.startswith("Deleted 1 ")
        assert output.endswith("in queue 'mail'.")
        assert remaining(alias) == {j.pk for j in history.values()} - {
            history["completed_old_mail"].pk
        }

    def test_dry_run_deletes_nothing(self, history: dict[str, Job], alias: str) -> None:
        output = run("purgejobs", "--days", "7", "--dry-run")
        assert output.startswith("Would delete 4 completed/dead/cancelled jobs")
        assert remaining(alias) == {job.pk for job in history.values()}

    def test_days_zero_takes_everything_finished(self, history: dict[str, Job], alias: str) -> None:
        assert run("purgejobs", "--days", "0").startswith("Deleted 5 ")

    def test_fractional_days(self, make_job: Any, alias: str) -> None:
        make_job(status=Status.COMPLETED, finished_at=timezone.now() - timedelta(hours=13))
        keep = make_job(status=Status.COMPLETED, finished_at=timezone.now() - timedelta(hours=11))
        assert run("purgejobs", "--days", "0.5").startswith("Deleted 1 ")
        assert remaining(alias) == {keep.pk}

    def test_nothing_to_purge(self, db: None) -> None:
        assert run("purgejobs", "--days", "7").startswith("Deleted 0 ")

    @pytest.mark.parametrize("batch_size", [1, 7, 10, 1000])
    def test_deletes_in_batches(self, make_job: Any, alias: str, batch_size: int) -> None:
        old = days_ago(30)
        Job.objects.using(alias).bulk_create(
            [Job(name="tests.noop", status=Status.COMPLETED, finished_at=old) for _ in range(30)]
        )
        keep = make_job(status=Status.PENDING)
        with CaptureQueriesContext(connections[alias]) as queries:
            output = run("purgejobs", "--days", "7", "--batch-size", str(batch_size))
        assert output.startswith("Deleted 30 ")
        assert remaining(alias) == {keep.pk}
        # One DELETE of jobs per batch (each batch also deletes their dependency rows).
        deletes = [
            q
            for q in queries
            if q["sql"].lstrip().upper().startswith("DELETE")
            and q["sql"].split()[2].strip('"`') == "django_sqlqueue_job"
        ]
        assert len(deletes) == math.ceil(30 / batch_size)

    @pytest.mark.parametrize(
        ("args", "match"),
        [
            (["--days", "-1"], "must not be negative"),
            (["--days", "7", "--batch-size", "0"], "at least 1"),
            (["--days", "7", "--status", "pending"], "invalid choice"),
            (["--days", "7", "--status", "running"], "invalid choice"),
            ([], "--days"),
        ],
        ids=["negative days", "zero batch", "pending", "running", "no days"],
    )
    def test_bad_arguments(
        self, history: dict[str, Job], alias: str, args: list, match: str
    ) -> None:
        with pytest.raises(CommandError, match=match):
            call_command("purgejobs", *args, stdout=io.StringIO())
        assert remaining(alias) == {job.pk for job in history.values()}


class TestJobStatus:
    @pytest.fixture
    def jobs(self, make_job: Any) -> None:
        for status, queue, count in [
            (Status.PENDING, "default", 2),
            (Status.PENDING, "mail", 1),
            (Status.RUNNING, "mail", 1),
            (Status.COMPLETED, "default", 3),
            (Status.FAILED, "reports", 1),
            (Status.DEAD, "default", 1),
        ]:
            for _ in range(count):
                make_job(status=status, queue=queue)

    def test_summary_line(self, jobs: None) -> None:
        assert run("jobstatus") == (
            "waiting: 0, pending: 3, running: 1, completed: 3, failed: 1, dead: 1, cancelled: 0"
        )

    def test_one_queue(self, jobs: None) -> None:
        assert run("jobstatus", "--queue", "mail") == (
            "waiting: 0, pending: 1, running: 1, completed: 0, failed: 0, dead: 0, cancelled: 0"
        )

    def test_unknown_queue_is_all_zero(self, jobs: None) -> None:
        assert run("jobstatus", "--queue", "nope") == (
            "waiting: 0, pending: 0, running: 0, completed: 0, failed: 0, dead: 0, cancelled: 0"
        )

    def test_by_queue(self, jobs: None) -> None:
        assert run("jobstatus", "--by-queue").splitlines() == [
            "default: waiting: 0, pending: 2, running: 0, completed: 3, failed: 0, dead: 1, "
            "cancelled: 0",
            "mail: waiting: 0, pending: 1, running: 1, completed: 0, failed: 0, dead: 0, "
            "cancelled: 0",
            "reports: waiting: 0, pending: 0, running: 0, completed: 0, failed: 1, dead: 0, "
            "cancelled: 0",
        ]

    def test_json(self, jobs: None) -> None:
        assert json.loads(run("jobstatus", "--json")) == {
            "waiting": 0,
            "pending": 3,
            "running": 1,
            "completed": 3,
            "failed": 1,
            "dead": 1,
            "cancelled": 0,
        }

    def test_json_for_one_queue(self, jobs: None) -> None:
        assert json.loads(run("jobstatus", "--json", "--queue", "reports"))["failed"] == 1

    def test_json_by_queue(self, jobs: None) -> None:
        data = json.loads(run("jobstatus", "--json", "--by-queue"))
        assert sorted(data) == ["default", "mail", "reports"]
        assert data["default"] == {
            "waiting": 0,
            "pending": 2,
            "running": 0,
            "completed": 3,
            "failed": 0,
            "dead": 1,
            "cancelled": 0,
        }

    def test_empty_table(self, db: None) -> None:
        assert run("jobstatus") == (
            "waiting: 0, pending: 0, running: 0, completed: 0, failed: 0, dead: 0, cancelled: 0"
        )
        assert run("jobstatus", "--by-queue") == "No jobs."
        assert json.loads(run("jobstatus", "--by-queue", "--json")) == {}


class TestJobStatusRunning:
    def test_lists_running_jobs_with_progress_and_cancel_requests(self, make_job: Any) -> None:
        started = timezone.now()
        make_job(
            status=Status.RUNNING,
            name="reports.export",
            attempts=1,
            lease_owner="web-1:1:aa",
            started_at=started,
            progress=40,
            progress_message="2,000 of 5,000 rows",
        )
        make_job(
            status=Status.RUNNING,
            attempts=2,
            lease_owner="web-1:1:bb",
            started_at=started,
            cancel_requested_at=started,
        )
        make_job(status=Status.PENDING)
        lines = run("jobstatus", "--running").splitlines()[1:]
        assert len(lines) == 2
        assert "reports.export attempt 1 on web-1:1:aa" in lines[0]
        assert "40% (2,000 of 5,000 rows)" in lines[0]
        assert lines[1].endswith("cancel requested")

    def test_json_and_nothing_running(self, make_job: Any) -> None:
        assert run("jobstatus", "--running").splitlines()[-1] == "No running jobs."
        make_job(status=Status.RUNNING, lease_owner="w", progress=5)
        documents = run("jobstatus", "--running", "--json").splitlines()
        [row] = json.loads(documents[-1])["running"]
        assert (row["lease_owner"], row["progress"]) == ("w", 5)


# `manage.py runworkers` as a process manager starts it: a declaration the system checks refuse
# (a cron of four fields) stops it, unless --skip-checks says to start anyway.
RUNWORKERS_FROM_THE_COMMAND_LINE = """
import os
from django.core.management import execute_from_command_line
from django.test.utils import override_settings

bad = {"SCHEDULES": {"typo": {"job": "tests.noop", "cron": "* * * *"}}}
with override_settings(SQLQUEUE=bad):
    execute_from_command_line(["manage.py", "runworkers", "--burst", *os.environ["ARGS"].split()])
print("ran")
"""


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("skip", [False, True], ids=["checks", "skip-checks"])
def test_runworkers_skip_checks_starts_despite_a_failing_check(
    spawn_django: Any, skip: bool
) -> None:
    child = spawn_django(
        RUNWORKERS_FROM_THE_COMMAND_LINE, env={"ARGS": "--skip-checks" if skip else ""}
    )
    out, err = child.communicate(timeout=120)
    if skip:
        assert child.returncode == 0, err
        assert out.strip().endswith("ran")
        assert "has 4 fields" in err, "the scheduler still logs the declaration it cannot run"
    else:
        assert child.returncode == 1
        assert "SystemCheckError" in err and "django_sqlqueue.E021" in err
        assert "ran" not in out


@pytest.mark.parametrize(
    "args",
    [
        ("purgejobs", "--days", "0"),
        ("purgejobs", "--days", "0", "--dry-run"),
        ("queues", "pause", "quiet-queue"),
        ("queues", "resume", "quiet-queue"),
        ("jobs", "purge", "--status", "completed", "--yes"),
        ("jobhealth",),
    ],
    ids=" ".join,
)
def test_commands_run_from_cron_are_silent_at_verbosity_0(make_job: Any, args: tuple[str]) -> None:
    """`-v 0` prints nothing (a line on stdout from cron becomes a mail); `-v 1` reports."""
    from django_sqlqueue.models import Worker

    make_job(status=Status.COMPLETED, finished_at=days_ago(1))
    Worker.objects.create(id="w-quiet", hostname="here", pid=1)  # jobhealth: one live worker

    def output(verbosity: int) -> str:
        out = io.StringIO()
        call_command(*args, verbosity=verbosity, stdout=out)
        return out.getvalue()

    assert output(0) == ""
    assert output(1) != ""


def test_schedules_sync_reports_only_above_verbosity_0() -> None:
    out = io.StringIO()
    call_command("schedules", "--sync", verbosity=0, stdout=out)
    assert "Sync:" not in out.getvalue()
    assert "Sync:" in run("schedules", "--sync")


def test_counts_in_messages_agree_with_their_noun() -> None:
    from django_sqlqueue.words import counted

    assert [counted(n, "job") for n in (0, 1, 2)] == ["0 jobs", "1 job", "2 jobs"]
    assert counted(1, "batch", "batches") == "1 batch"
    assert counted(3, "batch", "batches") == "3 batches"
