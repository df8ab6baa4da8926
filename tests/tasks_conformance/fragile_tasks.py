"""A task whose module cannot be imported in a worker that lacks one of its dependencies.

The test process imports it normally; a worker started with CONFORMANCE_BREAK_IMPORT set
fails to import it with ModuleNotFoundError, as a worker deployed without a package would.
"""

from __future__ import annotations

import dataclasses
import os

from .conftest import BREAK_IMPORT, compat

if os.environ.get(BREAK_IMPORT):
    import conformance_dependency_not_installed  # noqa: F401


def needs_a_dependency() -> str:
    return "imported"


needs_a_dependency = dataclasses.replace(compat.task(needs_a_dependency), max_attempts=1)
