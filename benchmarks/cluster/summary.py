"""The JSON summary of a cluster run, and its closing lines: pure, tested on made-up steps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def step_summary(
    hosts: int, numbers: dict[str, Any], drain: dict[str, Any], checks: list[Any]
) -> dict[str, Any]:
    return {
        "hosts": hosts,
        **numbers,
        "drain": drain,
        "checks": [{"name": c.name, "passed": c.passed, "detail": c.detail} for c in checks],
        "passed": all(c.passed for c in checks),
    }


def run_summary(steps: list[dict[str, Any]], meta: dict[str, Any]) -> dict[str, Any]:
    """Totals over the steps (each host count of --hosts is a step), and the drain
    throughput and database CPU per host count, for the scaling figures."""
    return {
        **meta,
        "hosts": [s["hosts"] for s in steps],
        "jobs": sum(s["jobs"] for s in steps),
        "lost": sum(s["lost"] for s in steps),
        "stuck": sum(s["stuck"] for s in steps),
        "unattributed_duplicates": sum(s["unattributed_duplicates"] for s in steps),
        "max_recovery_seconds": max((s["max_recovery_seconds"] for s in steps), default=0.0),
        "zombies_fenced": sum(s["zombies_fenced"] for s in steps),
        "throughput": {
            str(s["hosts"]): {
                "jobs_per_second": s["drain"].get("jobs_per_second"),
                "db_cpu_cores": s["drain"].get("db_cpu_cores"),
                "workers": s["drain"].get("workers"),
                "drained": s["drain"].get("drained"),
            }
            for s in steps
        },
        "steps": steps,
        "passed": bool(steps) and all(s["passed"] and s["drain"].get("drained") for s in steps),
    }


def print_summary(summary: dict[str, Any], say: Callable[[str], None]) -> None:
    for step in summary["steps"]:
        drain = step["drain"]
        say(
            f"hosts {step['hosts']}: {step['jobs']} jobs, {step['lost']} lost, "
            f"{step['stuck']} stuck, {step['unattributed_duplicates']} unattributed "
            f"duplicates ({step['attributed'] or 'none attributed'}), max recovery "
            f"{step['max_recovery_seconds']:.2f} s, {step['zombies_fenced']} zombie results "
            f"fenced; drain {drain.get('jobs_per_second')} jobs/s with "
            f"{drain.get('workers')} workers, database CPU {drain.get('db_cpu_cores')} cores"
        )
    say(
        f"CLUSTER {'PASS' if summary['passed'] else 'FAIL'}: hosts {summary['hosts']}, "
        f"{summary['jobs']} jobs, {summary['lost']} lost, "
        f"{summary['unattributed_duplicates']} unattributed duplicates, max recovery "
        f"{summary['max_recovery_seconds']:.2f} s (figures are not final: load average "
        f"{summary.get('load_average')})"
    )
