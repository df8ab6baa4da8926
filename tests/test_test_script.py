"""scripts/test.sh's summary: a local run that skipped a database's suites says so on its
last line, naming them, instead of ending on "all steps passed" (issue: without the servers a
run skipped them and still reported success). The script is sourced, which defines its
functions without running anything."""

from __future__ import annotations

import subprocess

from tests.conftest import REPO_ROOT


def summary(*records: str) -> list[str]:
    script = "source scripts/test.sh --quick\n" + "\n".join(records) + "\nsummary\n"
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
    )
    return (done.stdout + f"exit {done.returncode}").splitlines()


def test_a_run_that_skipped_suites_says_which_on_its_last_line() -> None:
    lines = summary(
        'record "ruff check" PASS 1 ""',
        'record "postgres server" SKIP 2 "(does not answer; its test runs are skipped)"',
        'record "pytest py312-dj61 postgres" SKIP 0 "(postgres does not answer)"',
        'record "pytest py312-dj61 sqlite" PASS 30 "10 passed in 29s"',
    )
    *_, verdict, totals, last, code = lines
    assert "all" not in verdict and "1 steps passed" not in verdict
    assert verdict.startswith("test.sh: 2 steps passed, 2 SKIPPED")
    assert totals.startswith("total: ")
    assert last == (
        "NOT A FULL RUN: SKIPPED postgres server; pytest py312-dj61 postgres "
        "(a database server did not answer: see scripts/check_services.sh)"
    )
    assert code == "exit 0"


def test_a_full_run_ends_with_its_totals() -> None:
    *_, verdict, last, code = summary(
        'record "ruff check" PASS 1 ""', 'record "pytest py312-dj61 sqlite" PASS 30 ""'
    )
    assert verdict.startswith("test.sh: all 2 steps passed")
    assert last.startswith("total: ")
    assert code == "exit 0"


def test_a_failure_fails_the_run() -> None:
    *_, verdict, _totals, last, code = summary(
        'record "ruff check" FAIL 1 "(exit 1)"',
        'record "pytest py312-dj61 mysql" SKIP 0 "(mysql does not answer)"',
    )
    assert "1 of 2 steps FAILED" in verdict
    assert "SKIPPED pytest py312-dj61 mysql" in last
    assert code == "exit 1"


def test_the_side_by_side_venv_build_is_a_step_that_names_a_failed_build() -> None:
    """The venvs are built side by side before their stacks' steps, which then only find them;
    the build's time and a build that failed there (built again by its stack's step) must show
    in the summary."""
    lines = summary(
        'RUN_TMP="$(mktemp -d)"; WAGTAIL_RUN=0',
        "mysql_build_deps() { :; }",
        "declare -A STACK_PYTHON=([good]=fake_python [bad]=fake_python)",
        "declare -A STACK_PIP=([good]=-e [bad]=-e)",
        "fake_python() { echo py; }",
        'ensure_venv() { [ "$1" = good ]; }',
        "prebuild_venvs good bad",
    )
    step = next(line for line in lines if "venvs side by side" in line)
    assert step.split()[0] == "PASS"
    assert "(good bad; failed here, built again below: bad)" in step
