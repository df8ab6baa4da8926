"""docs/quickstart.md, followed as a new user would, from its own text: `startproject`, the
files its blocks show, `migrate`, an enqueue in the shell, `jobstatus`, a worker, the view,
and the test it writes, which must pass. A block that stops pasting fails here.

Console blocks run their `$ ` lines (`django-admin` and `python` are this interpreter); a
Python block whose first line is `# path` is that file (`: add at the end` appends it); a
`pycon` block runs in `manage.py shell`, and each value it shows must be what the page shows.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import django
import pytest

from tests.runs import sqlite_runs_only

PAGE = Path(__file__).resolve().parent.parent / "docs" / "quickstart.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.S)

pytestmark = [
    pytest.mark.timeout(300),
    sqlite_runs_only("the quickstart's project runs on SQLite"),
]


class Follower:
    """Does what the page says, in a directory of its own."""

    def __init__(self, root: Path) -> None:
        self.cwd = root
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "SQLQUEUE_"))
        }
        self.shell_runs = 0

    def run(self, *args: str) -> str:
        done = subprocess.run(
            args, cwd=self.cwd, env=self.env, capture_output=True, text=True, timeout=120
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, f"{' '.join(args)} failed:\n{output}"
        return output

    def console(self, text: str) -> None:
        lines = text.splitlines()
        for index, line in enumerate(lines):
            if not line.startswith("$ "):
                continue
            words = line[2:].split()
            if words[0] == "cd":
                self.cwd = self.cwd / words[1]
                continue
            if words[0] == "django-admin":
                words = [sys.executable, "-m", "django", *words[1:]]
            elif words[0] == "python":
                words = [sys.executable, *words[1:]]
            output = self.run(*words)
            shown = [out for out in lines[index + 1 :] if out and not out.startswith("$ ")]
            if words[-1] == "jobstatus":
                assert output.splitlines() == shown, output  # the page's counts, as they are
            if words[-2:] == ["test", "shop"]:
                assert output.rstrip().splitlines()[-2:] == ["OK", shown[-1]], output

    def file(self, text: str) -> None:
        first, _, body = text.partition("\n")
        path, _, how = first.removeprefix("# ").partition(": ")
        target = self.cwd / path
        if how:
            assert how == "add at the end", first
            target.write_text(target.read_text() + "\n" + body)
        else:
            target.write_text(body)

    def shell(self, text: str) -> None:
        """Each `>>> ` statement in one shell, as typed; what it shows is what the page shows.
        A later block starts a new shell with the variables of the earlier ones' jobs."""
        statements = [line[4:] for line in text.splitlines() if line.startswith(">>> ")]
        expected = [line for line in text.splitlines()[1:] if not line.startswith(">>> ")]
        preamble = (
            ["from django_sqlqueue.models import Job", "job = Job.objects.order_by('pk').last()"]
            if self.shell_runs
            else []
        )
        script = (
            "import code\n"
            f"console = code.InteractiveConsole()\n"
            f"for line in {preamble + statements!r}:\n"
            "    console.push(line)\n"
        )
        output = self.run(sys.executable, "manage.py", "shell", "--no-imports", "-c", script)
        assert [line for line in output.splitlines() if line] == expected, output
        self.shell_runs += 1


def test_the_quickstart_runs_as_written(tmp_path: Path) -> None:
    follower = Follower(tmp_path)
    text = PAGE.read_text()
    if django.VERSION < (6, 1):
        # The page's advice for Django 5.2 and 6.0: print emails to the console.
        [line] = re.findall(r'`(EMAIL_BACKEND = "[^"]+")`', text)
        text = text.replace(
            "# mysite/settings.py: add at the end\n",
            f"# mysite/settings.py: add at the end\n{line}\n",
        )
    kinds = []
    for kind, body in BLOCK.findall(text):
        kinds.append(kind)
        if kind == "console":
            follower.console(body)
        elif kind == "python" and body.startswith("# ") and "/" in body.partition("\n")[0]:
            follower.file(body)
        elif kind == "pycon":
            follower.shell(body)
    assert kinds.count("pycon") == 2 and "python" in kinds
    assert (follower.cwd / "shop" / "tests.py").exists(), "the page's test was written and run"
