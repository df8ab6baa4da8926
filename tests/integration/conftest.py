"""Integration tests with real clients run in their own venv (scripts/test.sh sets
SQLQUEUE_INTEGRATION=1 there); the suite's own runs leave this directory alone."""

import os

if not os.environ.get("SQLQUEUE_INTEGRATION"):
    collect_ignore_glob = ["*"]
