"""The README's code does what its text says."""

from __future__ import annotations

import ast
import re

from tests.conftest import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_the_view_example_enqueues_inside_a_transaction() -> None:
    """The text promises that the job rolls back with the view's transaction: without
    ATOMIC_REQUESTS that takes an atomic() block around the writes and the enqueue."""
    [view] = [block for block in python_blocks() if "def signup(" in block]
    tree = ast.parse(view.replace("    ...\n", "    pass\n"))
    enqueues_in_atomic = [
        call
        for node in ast.walk(tree)
        if isinstance(node, ast.With)
        and any(ast.unparse(item.context_expr) == "transaction.atomic()" for item in node.items)
        for call in ast.walk(node)
        if isinstance(call, ast.Call) and ast.unparse(call.func).endswith(".enqueue")
    ]
    assert len(enqueues_in_atomic) == 1, view
    assert "from django.db import transaction" in view
    assert "ATOMIC_REQUESTS" in README


def test_the_readme_says_what_test_sh_needs() -> None:
    for need in ("bash 5.1", "Python 3.12 and 3.11", "PostgreSQL", "MariaDB", "root", "apt-get"):
        assert need in README, need
    assert "a machine that has only Python" not in README
