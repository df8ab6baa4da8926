"""One measurement in a fresh process on a fresh database: `python -m benchmarks.measure SPEC`.

SPEC is JSON: {"db", "system", "scenario", "params", "log"}. The last line printed is
RESULT_PREFIX followed by the result as JSON. A process per measurement means no state
(connections, caches, registries) leaks from one system or run into the next.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

RESULT_PREFIX = "BENCH-RESULT "
ROOT = Path(__file__).resolve().parent.parent


def code_fingerprint() -> str:
    """A hash of django-sqlqueue's source as measured: the code may change between runs."""
    digest = hashlib.sha1()
    for path in sorted((ROOT / "django_sqlqueue").rglob("*.py")):
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def queue_settings() -> dict[str, str]:
    """django-sqlqueue's effective settings (its defaults: the benchmark sets none)."""
    from django_sqlqueue.conf import get_settings

    return {key: repr(value) for key, value in vars(get_settings()).items()}


def measure(spec: dict[str, Any]) -> dict[str, Any]:
    vendor, name = spec["db"], spec["system"]
    os.environ.update(
        BENCH_DB=vendor,
        BENCH_SYSTEM=name,
        DJANGO_SETTINGS_MODULE="benchmarks.settings",
        PYTHONPATH=str(ROOT),  # for worker processes that are not `python -m` (huey_consumer)
    )
    from .databases import recreate
    from .markers import marker_dir

    os.environ["BENCH_MARKER_DIR"] = str(marker_dir())  # the workers inherit it
    recreate(vendor)

    import django

    django.setup()
    from .scenarios import SCENARIOS
    from .systems import Unsupported, system_class

    system = system_class("sqlqueue" if name == "raw" else name)(vendor, Path(spec["log"]))
    result: dict[str, Any] = {"status": "ok", "metrics": {}, "problems": ""}
    result["code"] = code_fingerprint()
    if name in ("sqlqueue", "sqlqueue_batch", "raw"):
        result["sqlqueue_settings"] = queue_settings()
    result["loadavg_before"] = os.getloadavg()
    began = time.monotonic()
    try:
        system.setup()
        metrics = SCENARIOS[spec["scenario"]].runner()(system, spec["params"])
        result["problems"] = metrics.pop("problems", "")
        result["metrics"] = metrics
    except Unsupported as exc:
        result.update(status="n/a", problems=str(exc))
    except Exception as exc:
        result.update(status="error", problems=f"{type(exc).__name__}: {exc}")
        result["traceback"] = traceback.format_exc()
    finally:
        try:
            system.teardown()
        except Exception as exc:  # report the measurement, not a cleanup hiccup
            result["teardown_error"] = repr(exc)
    result["loadavg_after"] = os.getloadavg()
    result["wall_s"] = time.monotonic() - began
    return result


def main() -> int:
    spec = json.loads(sys.argv[1])
    result = measure(spec)
    sys.stdout.write("\n" + RESULT_PREFIX + json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
