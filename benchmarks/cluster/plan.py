"""What a cluster run will do and when: pure functions, tested without root or a database."""

from __future__ import annotations

from dataclasses import dataclass

#: A partition lasts this many leases unless --cut-seconds says otherwise: long enough for
#: the lease to expire and housekeeping on another host to recover the jobs.
CUT_LEASES = 3.0
#: Seconds kept free after the last fault, so its recoveries happen while producers still run.
TAIL_SECONDS = 5.0
#: A run longer than this repeats its faults once per cycle of about this length.
CYCLE_SECONDS = 120.0
#: Most hosts a run makes (one /24 holds them; the relay needs a port each).
MAX_HOSTS = 16


@dataclass(frozen=True)
class Fault:
    #: Seconds after the start of the run.
    at: float
    kind: str  # "cut" or "restart-db"
    #: How long a cut lasts (0 for a restart: it lasts as long as it takes).
    seconds: float = 0.0


def parse_hosts(text: str) -> list[int]:
    """`--hosts 1,2,4` -> [1, 2, 4]: each count is a step of its own, in the order given."""
    counts = []
    for part in text.split(","):
        part = part.strip()
        if not part.isdigit() or not 1 <= int(part) <= MAX_HOSTS:
            raise ValueError(f"--hosts takes counts from 1 to {MAX_HOSTS}, like 1,2,4: {text!r}")
        counts.append(int(part))
    return counts


def cut_length(lease: float, cut_seconds: float | None) -> float:
    seconds = CUT_LEASES * lease if cut_seconds is None else cut_seconds
    if seconds <= lease:
        raise ValueError(
            f"a partition must outlast the lease ({lease:g} s) to test recovery and fencing"
        )
    return seconds


def plan_faults(
    seconds: float,
    hosts: int,
    *,
    partition: bool,
    restart_db: bool,
    lease: float,
    cut_seconds: float | None = None,
) -> list[Fault]:
    """The faults of one step, per cycle of about two minutes (one cycle for short runs): a
    cut at a quarter of the cycle, a database restart after the cut has healed (at 70% of
    the cycle, or later if the cut is long).

    A partition needs another host to recover the cut host's jobs: with one host it is left
    out. Raises ValueError when the run is too short to fit the faults and their recovery.
    """
    faults, free_from = _layout(seconds, hosts, partition, restart_db, lease, cut_seconds)
    if faults and free_from + TAIL_SECONDS > seconds:
        shortest = next(
            n
            for n in range(int(seconds) + 1, 100_000)
            if _layout(n, hosts, partition, restart_db, lease, cut_seconds)[1] + TAIL_SECONDS <= n
        )
        raise ValueError(
            f"{seconds:g} s is too short for these faults and their recovery: "
            f"give at least --seconds {shortest}"
        )
    return faults


def _layout(
    seconds: float,
    hosts: int,
    partition: bool,
    restart_db: bool,
    lease: float,
    cut_seconds: float | None,
) -> tuple[list[Fault], float]:
    """The faults, one cut and one restart per cycle of about two minutes, and the second
    from which the run is quiet again (infinite if two faults would overlap)."""
    faults: list[Fault] = []
    free_from = 0.0
    cycles = max(1, round(seconds / CYCLE_SECONDS))
    length = seconds / cycles
    for cycle in range(cycles):
        base = cycle * length
        if partition and hosts >= 2:
            at = base + 0.25 * length
            if at < free_from:
                return faults, float("inf")
            cut = cut_length(lease, cut_seconds)
            faults.append(Fault(at, "cut", cut))
            free_from = at + cut + 2.0
        if restart_db:
            at = max(base + 0.7 * length, free_from)
            faults.append(Fault(at, "restart-db"))
            free_from = at + 2.0
    return faults, free_from


def pick_cut_host(held: dict[int, int], hosts: int) -> int:
    """The host to cut: the one holding the most running jobs (the fault then has jobs to
    recover and zombies to fence), the highest number on a tie, never host 1 if another
    holds as many (host 1 keeps the scaling steps comparable)."""
    return max(range(1, hosts + 1), key=lambda host: (held.get(host, 0), host))


def relay_port(base: int, host: int) -> int:
    """The relay's port for `host` (when latency goes through the relay)."""
    return base + host
