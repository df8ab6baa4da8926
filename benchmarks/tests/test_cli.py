"""The command line's promises: results land in a folder git ignores unless published, and
a run without the peers' packages stops at once, naming the extra, instead of filling the
table with import tracebacks."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import cli
from benchmarks.cli import LOCAL_RESULTS, RESULTS, missing_modules, output_path, parse_args, plan

ROOT = Path(__file__).resolve().parents[2]


def test_results_go_to_an_ignored_folder_unless_published() -> None:
    local = output_path(parse_args(["run"]), "20260101T000000Z")
    assert local == LOCAL_RESULTS / "20260101T000000Z.json"
    ignored = subprocess.run(
        ["git", "check-ignore", "-q", str(local)], cwd=ROOT, capture_output=True
    )
    assert ignored.returncode == 0, "benchmarks/results/local/ must be in .gitignore"
    published = output_path(parse_args(["run", "--publish", "--quick"]), "20260101T000000Z")
    assert published == RESULTS / "20260101T000000Z-quick.json"
    tracked = subprocess.run(["git", "check-ignore", "-q", str(published)], cwd=ROOT)
    assert tracked.returncode == 1, "published results must not be ignored"
    chosen = output_path(parse_args(["run", "--output", "/tmp/x.json"]), "stamp")
    assert chosen == Path("/tmp/x.json")
    with pytest.raises(SystemExit):
        parse_args(["run", "--publish", "--output", "/tmp/x.json"])


def test_missing_peers_are_named_with_their_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(cli.PEER_MODULES, "huey", (("no_such_module_xyz", "huey"),))
    args = ["run", "--db", "sqlite", "--systems", "sqlqueue,huey", "--scenarios", "drain"]
    steps = plan(parse_args(args))
    assert missing_modules(steps) == ["no_such_module_xyz (huey, for huey; extra `bench`)"]
    monkeypatch.setitem(cli.DRIVER_MODULES, "postgres", ("no_such_driver_xyz", "psycopg", "pg"))
    steps = plan(parse_args(["run", "--db", "postgres", "--systems", "sqlqueue"]))
    assert missing_modules(steps) == ["no_such_driver_xyz (psycopg, for postgres; extra `pg`)"]
    ours = plan(parse_args(["run", "--db", "sqlite", "--systems", "sqlqueue", "--quick"]))
    assert missing_modules(ours) == []


@pytest.mark.skipif(importlib.util.find_spec("huey") is not None, reason="the bench extra is here")
def test_a_run_without_the_bench_extra_exits_non_zero_before_measuring(tmp_path: Path) -> None:
    output = tmp_path / "results.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "run",
            "--quick",
            "--db",
            "sqlite",
            "--systems",
            "huey",
            "--scenarios",
            "drain",
            "--no-warmup",
            "--output",
            str(output),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "huey (huey, for huey; extra `bench`)" in done.stderr
    assert "pip install -e '.[dev,bench]'" in done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    assert not output.exists(), "nothing was measured"
