"""A worker process starts without importing what it may never use: croniter (only where a
cron expression is read) and OpenTelemetry's propagators (only once a tracer provider is set).
Each costs ~20 ms at every `runworkers` start, which is part of every short burst's time."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import sys
import django
django.setup()
from django.core.management import load_command_class
load_command_class("django_sqlqueue", "runworkers")
from django_sqlqueue.runtime import supervisor, worker  # noqa: F401
from django_sqlqueue import scheduling, tracing  # noqa: F401
print(" ".join(sorted(m for m in sys.modules if m.startswith(("croniter", "opentelemetry.")))))
"""


def test_runworkers_imports_neither_croniter_nor_otel_propagators(tmp_path: Path) -> None:
    (tmp_path / "startup_settings.py").write_text(
        textwrap.dedent(
            f"""
            SECRET_KEY = "test"
            INSTALLED_APPS = ["django_sqlqueue"]
            DATABASES = {{"default": {{
                "ENGINE": "django.db.backends.sqlite3", "NAME": {str(tmp_path / "db.sqlite3")!r}
            }}}}
            USE_TZ = True
            """
        )
    )
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={
            "PATH": "/usr/bin:/bin",
            "PYTHONPATH": f"{tmp_path}:{REPO_ROOT}",
            "DJANGO_SETTINGS_MODULE": "startup_settings",
        },
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    loaded = done.stdout.split()
    assert not [name for name in loaded if name.startswith("croniter")], loaded
    assert "opentelemetry.propagate" not in loaded, loaded
