#!/usr/bin/env bash
# Installs Debian's PgBouncer for the PgBouncer tests (tests/workers/test_pgbouncer.py), which
# start it themselves on a port of their own. Idempotent: returns at once when it is there.
# The package's own service is not wanted (the tests run their own): where systemd runs, it
# is stopped and disabled again.
set -euo pipefail

if dpkg-query -W -f='${Status}' pgbouncer 2>/dev/null | grep -q "install ok installed"; then
    echo "install_pgbouncer: pgbouncer already installed"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    sudo=()
else
    sudo=(sudo)
fi

echo "install_pgbouncer: installing pgbouncer"
export DEBIAN_FRONTEND=noninteractive
if ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends pgbouncer </dev/null; then
    "${sudo[@]}" apt-get update -qq </dev/null
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends pgbouncer </dev/null
fi
if [ -d /run/systemd/system ]; then
    "${sudo[@]}" systemctl disable --now pgbouncer >/dev/null 2>&1 || true
fi
/usr/sbin/pgbouncer --version | head -n1
