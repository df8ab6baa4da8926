"""docs/architecture.md, the contributors' map, stays true to the package it maps."""

from __future__ import annotations

import re
from pathlib import Path

import django_sqlqueue
from django_sqlqueue.states import ALL_TRANSITIONS

PACKAGE = Path(django_sqlqueue.__file__).parent
MAP = (PACKAGE.parent / "docs" / "architecture.md").read_text()
COMMANDS = sorted(
    path.stem
    for path in (PACKAGE / "management" / "commands").glob("*.py")
    if not path.stem.startswith("_")
)


def test_every_management_command_is_named() -> None:
    assert COMMANDS, "no commands found"
    missing = [name for name in COMMANDS if f"`{name}`" not in MAP]
    assert not missing, f"docs/architecture.md does not name the commands {missing}"


def test_every_transition_of_the_state_machine_is_named() -> None:
    missing = [t.name.upper() for t in ALL_TRANSITIONS if f"`{t.name.upper()}`" not in MAP]
    assert not missing, f"docs/architecture.md does not name the transitions {missing}"


def test_every_module_it_names_exists() -> None:
    """A path in backticks that looks like a module or a folder must be one: of the package
    (from django_sqlqueue/, or from the subpackage its row is about) or of the repository."""
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+(?:\.py|/))`", MAP))
    modules = [
        path.relative_to(PACKAGE).as_posix() + ("/" if path.is_dir() else "")
        for path in PACKAGE.rglob("*")
        if "__pycache__" not in path.parts
    ]
    missing = sorted(
        name
        for name in named
        if not (PACKAGE.parent / name).exists()
        and not any(module == name or module.endswith("/" + name) for module in modules)
    )
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"
