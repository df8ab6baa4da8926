"""The async half of the API: aenqueue, aget_result, arefresh, acall, and the backend's own."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import async_to_sync

from . import tasks
from .conftest import RunWorkers, compat

Status = compat.TaskResultStatus if compat else None


@pytest.mark.django_db
class TestInProcess:
    def test_aenqueue_stores_what_enqueue_would(self, backend: Any) -> None:
        result = async_to_sync(tasks.echo.aenqueue)(1, k="v")
        assert result.status == Status.READY
        assert (result.args, result.kwargs) == ([1], {"k": "v"})
        assert result == backend.get_result(result.id)

    def test_aget_result(self) -> None:
        result = tasks.add.enqueue(1, 2)
        assert async_to_sync(tasks.add.aget_result)(result.id) == result
        with pytest.raises(compat.TaskResultMismatch):
            async_to_sync(tasks.echo.aget_result)(result.id)
        with pytest.raises(compat.TaskResultDoesNotExist):
            async_to_sync(tasks.add.aget_result)("not-an-id")

    def test_the_backends_own_async_methods(self, backend: Any) -> None:
        result = async_to_sync(backend.aenqueue)(tasks.add, [3], {"b": 4})
        assert async_to_sync(backend.aget_result)(result.id) == result


@pytest.mark.workers
@pytest.mark.django_db(transaction=True)
def test_arefresh_sees_what_the_worker_did(run_workers: RunWorkers) -> None:
    result = async_to_sync(tasks.add.aenqueue)(20, 22)

    run_workers()

    async_to_sync(result.arefresh)()
    assert (result.status, result.return_value) == (Status.SUCCESSFUL, 42)
    assert result.is_finished
