"""`python -m benchmarks.attempt_cost`: it measures the code it is pointed at (today's layout
and the flat one of before), reports every variant, and refuses what it cannot measure."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
from io import BytesIO
from pathlib import Path

import pytest

from benchmarks.attempt_cost.cli import PIECES, Variant, parse_args, report, variants

ROOT = Path(__file__).resolve().parents[2]
#: The last main before the package was regrouped by the job's life (flat layout).
FLAT_LAYOUT = "128dd8b"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "benchmarks.attempt_cost", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def export_flat_layout(into: Path) -> bool:
    """The package as it was at FLAT_LAYOUT, from this clone's history (False if absent)."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", FLAT_LAYOUT, "django_sqlqueue"],
        cwd=ROOT,
        capture_output=True,
    )
    if archive.returncode != 0:
        return False
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(into, filter="data")
    return True


def test_every_piece_is_a_variant_and_all_of_them_one_more() -> None:
    found = variants(parse_args([]))
    labels = [v.label for v in found]
    assert labels[:3] == [
        "this checkout, batch recording",
        "the same again (noise control)",
        "this checkout, per-job recording (default)",
    ]
    assert [v.without for v in found[3:-1]] == [(piece,) for piece in PIECES]
    assert found[-1].without == tuple(PIECES)


def test_a_checkout_with_per_job_recording_is_measured_in_both_modes(tmp_path: Path) -> None:
    (tmp_path / "django_sqlqueue").mkdir()
    (tmp_path / "django_sqlqueue" / "conf.py").write_text('Setting("BATCH_COMPLETION", False)')
    found = variants(parse_args(["--against", str(tmp_path), "--pieces", ""]))
    against = [(v.label, v.mode) for v in found if v.code == tmp_path.resolve()]
    assert against == [
        (f"{tmp_path}, batch recording", "batch"),
        (f"{tmp_path}, per-job recording (default)", "default"),
    ]


def test_bad_arguments_are_refused(tmp_path: Path) -> None:
    for argv in (["--pieces", "rollup,nonsense"], ["--jobs", "0"], ["--against", str(tmp_path)]):
        with pytest.raises(SystemExit):
            parse_args(argv)


def test_the_report_gives_each_variant_its_cost_per_job_against_the_full_path() -> None:
    full = Variant("full", ROOT, "batch", rates=[10_000.0, 9_000.0, 11_000.0])
    lighter = Variant("without x", ROOT, "batch", ("x",), rates=[20_000.0])
    lines = report([full, lighter]).splitlines()
    assert re.search(r"full\s+10,000 \(9,000-11,000\)\s+100\.0\s*$", lines[1])
    assert re.search(r"without x\s+20,000 \(20,000-20,000\)\s+50\.0\s+-50\.0$", lines[2])


@pytest.mark.slow
def test_it_measures_today_and_the_flat_layout_side_by_side(tmp_path: Path) -> None:
    if not export_flat_layout(tmp_path):
        pytest.fail(f"{FLAT_LAYOUT} is not in this clone's history: clone without --depth")
    done = run(
        "--jobs", "60", "--rounds", "1", "--pieces", "timer,leak_guard", "--against", str(tmp_path)
    )
    assert done.returncode == 0, done.stderr
    rows = {
        label.strip(): float(rate.replace(",", ""))
        for label, rate in re.findall(r"^(\S.*?)\s{2,}([\d,]+) \(", done.stdout, re.M)
    }
    assert set(rows) == {
        "this checkout, batch recording",
        "the same again (noise control)",
        "this checkout, per-job recording (default)",
        f"{tmp_path.resolve()}, batch recording",
        "batch, without timer",
        "batch, without leak_guard",
        "batch, without all of them",
    }, done.stdout
    assert all(rate > 0 for rate in rows.values())
    assert "load average before" in done.stdout and "load average after" in done.stdout


@pytest.mark.slow
def test_a_checkout_that_is_not_measured_is_refused(tmp_path: Path) -> None:
    """The child checks whose package it imported: a broken --against must not silently
    measure this checkout instead."""
    (tmp_path / "django_sqlqueue").mkdir()  # no package inside: imports fall through
    done = run("--jobs", "10", "--rounds", "1", "--pieces", "", "--against", str(tmp_path))
    assert done.returncode != 0
    assert "measurement failed" in done.stderr
    assert f"not the code in {tmp_path}" in done.stderr
