#!/usr/bin/env bash
# Installs Debian's libfaketime for the clock tests (tests/workers/test_scheduler_clocks.py):
# a supervisor run under it sees its host's clock skewed or stepped, nothing else does.
set -euo pipefail
source "$(dirname "$0")/_apt.sh"

apt_install_once faketime
ls /usr/lib/*/faketime/libfaketime.so.1
