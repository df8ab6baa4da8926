"""Every `manage.py` command line the docs show is one the command accepts.

The docs once told deployments to run `runworkers --skip-checks`, which the command refused:
this reads every command line in README.md and docs/ and checks it against the parser.
"""

from __future__ import annotations

import argparse
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.core.management import load_command_class
from django.core.management.base import CommandError, CommandParser

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
COMMANDS = ("runworkers", "purgejobs", "jobhealth", "jobstatus", "queues", "movejobs", "schedules")
# `jobs` is also a word of the prose: only `manage.py jobs` is the command.
COMMAND = re.compile(
    r"(?<![-\w])(" + "|".join(COMMANDS) + r"|(?<=manage\.py )jobs)\b(?=\s+-|\s+[a-z]|$)"
)
OPTION = re.compile(r"^(--?[A-Za-z][-\w]*)")
SHELL_END = re.compile(r"\s(?:#|\||&&|;|>)|\)")
# A synopsis, not an example: placeholders the reader replaces.
PLACEHOLDER = re.compile(r"\[|…|\.\.\.|\b[A-Z]{2,}\b")


@dataclass(frozen=True)
class CommandLine:
    where: str
    command: str
    words: tuple[str, ...]
    example: bool  # a whole command line to parse, not a synopsis or a mention in prose

    def __str__(self) -> str:
        return f"{self.where}: {self.command} {' '.join(self.words)}"


def _lines_of(path: Path) -> list[tuple[int, str, bool]]:
    """(line number, text, inside a fenced block); outside fences only backtick spans."""
    found: list[tuple[int, str, bool]] = []
    fenced = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            found.append((number, line, True))
        else:
            found.extend((number, span, False) for span in re.findall(r"`([^`]+)`", line))
    return found


def documented_command_lines() -> list[CommandLine]:
    lines = []
    for path in DOCUMENTS:
        for number, text, fenced in _lines_of(path):
            for match in COMMAND.finditer(text):
                rest = text[match.end() :]
                end = SHELL_END.search(rest)
                rest = rest[: end.start()] if end else rest
                try:
                    words = tuple(shlex.split(rest))
                except ValueError:
                    words = tuple(rest.split())
                example = (
                    fenced and "manage.py" in text[: match.start()] and not PLACEHOLDER.search(rest)
                )
                where = f"{path.relative_to(ROOT)}:{number}"
                lines.append(CommandLine(where, match.group(1), words, example))
    return lines


def _parser(command: str) -> CommandParser:
    return load_command_class("django_sqlqueue", command).create_parser("manage.py", command)


def _options_of(parser: CommandParser) -> set[str]:
    options = {option for action in parser._actions for option in action.option_strings}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for subparser in action.choices.values():
                options |= _options_of(subparser)
    return options


LINES = documented_command_lines()


def test_the_docs_show_command_lines() -> None:
    assert len(LINES) > 50
    assert any(line.command == "runworkers" and "--skip-checks" in line.words for line in LINES)
    assert sum(line.example for line in LINES) > 30


@pytest.mark.parametrize("line", LINES, ids=str)
def test_every_documented_option_exists(line: CommandLine) -> None:
    known = _options_of(_parser(line.command))
    for word in line.words:
        option = OPTION.match(word)
        if option and not re.fullmatch(r"-\d+", word):
            name = option.group(1).split("=")[0]
            assert name in known, f"{line}: {line.command} has no option {name}"


@pytest.mark.parametrize("line", [line for line in LINES if line.example], ids=str)
def test_every_documented_example_parses(line: CommandLine) -> None:
    try:
        _parser(line.command).parse_args(list(line.words))
    except CommandError as exc:
        pytest.fail(f"{line}: {exc}")
