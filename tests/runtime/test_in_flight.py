"""The jobs a worker runs, one cell per slot, as its supervisor reads them (in_flight.py), and
the supervisor's lease keeping of a worker with many slots (lease_keeper.py)."""

from __future__ import annotations

import multiprocessing
import os
import sys
from types import SimpleNamespace

import pytest

from django_sqlqueue.conf import get_settings
from django_sqlqueue.runtime.in_flight import InFlight
from django_sqlqueue.runtime.lease_keeper import LeaseKeeper, cpu_state


def test_cells_read_as_the_running_jobs_in_slot_order() -> None:
    cells = InFlight(multiprocessing.get_context(), 4)
    assert (cells.ids(), cells.value) == ([], 0)
    cells.set(2, 30)
    cells.set(0, 10)
    assert (cells.ids(), cells.value) == ([10, 30], 10)
    cells.set(0, 0)
    assert (cells.ids(), cells.value) == ([30], 30)
    cells.value = 7  # a one-slot worker writes its only cell
    assert cells.ids() == [7, 30]


def burn_until_ticks_pass(pid: int) -> None:
    """Use the CPU until the kernel counts at least one more tick for this process."""
    state = cpu_state(pid)
    assert state is not None
    while (now := cpu_state(pid)) is not None and now[1] <= state[1]:
        sum(range(10_000))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_keeper_renews_the_jobs_a_slotted_child_ran_at_both_looks() -> None:
    cells = InFlight(multiprocessing.get_context(), 3)
    pid = os.getpid()
    child = SimpleNamespace(
        worker_id="w1", process=SimpleNamespace(pid=pid, exitcode=None), current_job=cells
    )
    keeper = LeaseKeeper(get_settings())
    cells.set(0, 11)
    cells.set(1, 12)
    assert keeper.working([child]) == [], "the first look only notes what runs"
    burn_until_ticks_pass(pid)
    cells.set(1, 0)  # job 12 ended between the looks, job 13 started
    cells.set(2, 13)
    assert keeper.working([child]) == [(11, "w1")]
    burn_until_ticks_pass(pid)
    assert keeper.working([child]) == [(11, "w1"), (13, "w1")]
