#!/usr/bin/env bash
# Installs Debian's PgBouncer for the PgBouncer tests (tests/workers/test_pgbouncer.py), which
# start it themselves on a port of their own. Idempotent: returns at once when it is there.
# The package's own service is not wanted (the tests run their own): where systemd runs, it
# is stopped and disabled again.
set -euo pipefail
source "$(dirname "$0")/_apt.sh"

apt_install_once pgbouncer
if [ -d /run/systemd/system ]; then
    sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    "${sudo[@]}" systemctl disable --now pgbouncer >/dev/null 2>&1 || true
fi
/usr/sbin/pgbouncer --version | head -n1
