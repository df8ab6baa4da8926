"""`TaskResult` as the enqueueing process sees it: equality, refresh, and result ids."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from django_sqlqueue.models import Job
from django_sqlqueue.references import id_in
from tests.testapp.jobs import add as add_job

from . import tasks
from .conftest import compat

pytestmark = pytest.mark.django_db

#: Digits str.isdigit() accepts besides 0-9, by code point: superscripts (which int() then
#: refuses), Arabic-Indic and fullwidth digits (which int() reads as 0-9).
SUPERSCRIPT = "".join(map(chr, (0x2070, 0xB9, 0xB2, 0xB3, *range(0x2074, 0x207A))))
ARABIC_INDIC = "".join(chr(0x660 + digit) for digit in range(10))
FULLWIDTH = "".join(chr(0xFF10 + digit) for digit in range(10))


def spelled(result_id: str, digits: str) -> str:
    """`result_id` with its ASCII decimal digits written in `digits` (the rest kept)."""
    return "".join(digits[int(d)] if d in "0123456789" else d for d in result_id)


class TestEquality:
    def test_a_result_equals_the_same_result_read_back(self, backend: Any) -> None:
        result = tasks.echo.enqueue(1, k=[2, 3])
        assert result == backend.get_result(result.id)
        assert result == tasks.echo.get_result(result.id)

    def test_with_a_run_after_in_the_future(self, backend: Any) -> None:
        result = tasks.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(1, 2)
        assert result == backend.get_result(result.id)

    def test_with_a_run_after_in_the_past(self, backend: Any) -> None:
        past = timezone.now() - timedelta(minutes=5)
        result = tasks.add.using(run_after=past).enqueue(1, 2)
        assert backend.get_result(result.id).task.run_after == past
        assert result == backend.get_result(result.id)

    def test_results_of_different_tasks_differ(self) -> None:
        assert tasks.add.enqueue(1, 2) != tasks.add.enqueue(1, 2)


class TestRefresh:
    def test_refresh_of_an_unchanged_result_changes_nothing(self, backend: Any) -> None:
        result = tasks.add.enqueue(1, 2)
        result.refresh()
        assert result == backend.get_result(result.id)
        assert result.status == compat.TaskResultStatus.READY

    def test_arefresh(self, backend: Any) -> None:
        result = tasks.add.enqueue(1, 2)
        async_to_sync(result.arefresh)()
        assert result == backend.get_result(result.id)


class TestResultIds:
    def test_ids_are_job_references_under_64_characters(self) -> None:
        results = [tasks.add.enqueue(i, i) for i in range(3)]
        for result in results:
            assert isinstance(result.id, str)
            job = Job.objects.get(pk=id_in(result.id))
            assert result.id == job.reference == f"{job.pk}-{job.ref_nonce:x}"
            assert len(result.id) < 64
        assert len({result.id for result in results}) == 3

    @pytest.mark.parametrize(
        "result_id",
        [
            "",
            " ",
            "abc",
            "0",
            "-1",
            "+1",
            "1.0",
            "1e3",
            "0x10",
            "None",
            "null",
            str(2**63),
            str(2**64),
            "9" * 100,
            str(uuid.uuid4()),
            "1; DROP TABLE django_sqlqueue_job",
        ],
    )
    def test_anything_that_is_not_an_id_does_not_exist(self, backend: Any, result_id: str) -> None:
        tasks.add.enqueue(1, 1)
        with pytest.raises(compat.TaskResultDoesNotExist):
            backend.get_result(result_id)
        with pytest.raises(compat.TaskResultDoesNotExist):
            async_to_sync(backend.aget_result)(result_id)
        with pytest.raises(compat.TaskResultDoesNotExist):
            tasks.add.get_result(result_id)

    def test_an_id_with_spaces_around_it_does_not_exist(self, backend: Any) -> None:
        result = tasks.add.enqueue(1, 1)
        for padded in (f" {result.id}", f"{result.id} ", f"{result.id}\n"):
            with pytest.raises(compat.TaskResultDoesNotExist):
                backend.get_result(padded)

    def test_an_id_deleted_since_does_not_exist(self, backend: Any, alias: str) -> None:
        from django_sqlqueue.models import Job

        result = tasks.add.enqueue(1, 1)
        Job.objects.using(alias).filter(pk=id_in(result.id)).delete()
        with pytest.raises(compat.TaskResultDoesNotExist):
            backend.get_result(result.id)

    def test_ids_of_other_backends_and_of_plain_jobs_do_not_exist(self, backend: Any) -> None:
        other = tasks.add.using(backend="strict").enqueue(1, 1)
        with pytest.raises(compat.TaskResultDoesNotExist):
            backend.get_result(other.id)
        job = add_job.enqueue(1, 2)
        with pytest.raises(compat.TaskResultDoesNotExist):
            backend.get_result(str(job.pk))

    def test_digits_int_cannot_read_do_not_exist(self, backend: Any) -> None:
        result = tasks.add.enqueue(1, 1)
        with pytest.raises(compat.TaskResultDoesNotExist):
            backend.get_result(spelled(result.id, SUPERSCRIPT))

    @pytest.mark.parametrize(
        "spell",
        [
            pytest.param(lambda i: "0" + i, id="leading-zero"),
            pytest.param(lambda i: spelled(i, ARABIC_INDIC), id="arabic-indic"),
            pytest.param(lambda i: spelled(i, FULLWIDTH), id="fullwidth"),
        ],
    )
    def test_other_spellings_of_an_id_do_not_exist(self, backend: Any, spell: Any) -> None:
        result = tasks.add.enqueue(1, 1)
        with pytest.raises(compat.TaskResultDoesNotExist):
            backend.get_result(spell(result.id))
