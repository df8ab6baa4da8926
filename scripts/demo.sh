#!/usr/bin/env bash
# The example project on SQLite, on a machine that has only Python: builds .venv-demo, migrates,
# makes a staff login, starts the web server and two workers, enqueues some jobs, and prints
# where to look. Ctrl+C stops it all.
#
#   scripts/demo.sh           # runs until Ctrl+C (DEMO_PORT=8000 by default)
#   scripts/demo.sh --check   # headless: start everything in a scratch database, check that
#                             # the page answers and jobs complete, stop, exit 0 or 1
#
# SQLQUEUE_DEMO_PYTHON=/path/to/python uses that interpreter as it is instead of .venv-demo
# (the tests run the check with their own interpreter this way).
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
PROJECT_DIR="$REPO_ROOT/example_project"

CHECK=0
case "${1:-}" in
    --check) CHECK=1 ;;
    "") ;;
    -h | --help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument: $1 (expected --check)" >&2; exit 2 ;;
esac

CHECK_SECONDS="${DEMO_CHECK_SECONDS:-45}" # longest wait for jobs to complete in --check
WANT_COMPLETED=10
WEB_PID=""
WORKERS_PID=""
SCRATCH=""

STOP_EXIT=0
stop_process() { # stop_process PID NAME: SIGTERM, SIGKILL after 20 s; sets STOP_EXIT to its code
    local pid="$1" name="$2" waited=0
    STOP_EXIT=0
    [ -n "$pid" ] || return 0
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt 200 ]; do
            sleep 0.1
            waited=$((waited + 1))
        done
        if kill -0 "$pid" 2>/dev/null; then
            warn "$name did not stop within 20 s; killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    wait "$pid" 2>/dev/null || STOP_EXIT=$?
}

STOPPED=0
WORKERS_EXIT=""
stop_all() {
    [ "$STOPPED" = 1 ] && return 0
    STOPPED=1
    [ -z "$WORKERS_PID$WEB_PID" ] || log "Stopping the workers and the web server"
    stop_process "$WORKERS_PID" runworkers
    WORKERS_EXIT=$STOP_EXIT
    stop_process "$WEB_PID" runserver
}

cleanup() {
    stop_all
    [ -z "$SCRATCH" ] || rm -rf "$SCRATCH"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ----------------------------------------------------------------------------- set up

if [ -n "${SQLQUEUE_DEMO_PYTHON:-}" ]; then
    PY="$SQLQUEUE_DEMO_PYTHON"
    # Absolute, but not resolved: a venv's python must keep its venv's path.
    case "$PY" in
        /*) ;;
        */*) PY="$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")" ;;
        *) PY="$(command -v "$PY")" ;;
    esac
else
    base_python="$(find_python312)"
    [ -n "$base_python" ] || base_python="$(command -v python3)"
    PY="$(ensure_venv demo "$base_python" -e .)"
fi
cd "$PROJECT_DIR"
export DJANGO_DEBUG=1
manage() { "$PY" manage.py "$@"; }

free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

port_in_use() {
    "$PY" -c 'import socket, sys; s = socket.socket()
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)' "$1"
}

if [ "$CHECK" = 1 ]; then
    # A scratch database and key, so a check never touches the demo's own files.
    SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/sqlqueue-demo-check.XXXXXX")"
    export EXAMPLE_DB_PATH="$SCRATCH/db.sqlite3"
    DJANGO_SECRET_KEY="$("$PY" -c 'import secrets; print(secrets.token_urlsafe(50))')"
    export DJANGO_SECRET_KEY
    PORT="$(free_port)"
    WEB_LOG="$SCRATCH/web.log"
    WORKERS_LOG="$SCRATCH/workers.log"
else
    PORT="${DEMO_PORT:-8000}"
    if port_in_use "$PORT"; then
        echo "Port $PORT is in use (another demo?). Stop it, or run DEMO_PORT=8001 $0" >&2
        exit 1
    fi
    WEB_LOG=/dev/stdout
    WORKERS_LOG=/dev/stdout
fi
URL="http://127.0.0.1:$PORT"

log "Migrating the example project's SQLite database"
manage migrate --noinput -v0

DEMO_PASSWORD="$("$PY" -c 'import secrets; print(secrets.token_urlsafe(12))')"
DEMO_PASSWORD="$DEMO_PASSWORD" manage ensure_demo_user demo

HAS_WORKERS=1
if ! manage help runworkers >/dev/null 2>&1; then
    HAS_WORKERS=0
    warn "this version of django-sqlqueue has no runworkers command: jobs will stay pending"
fi

# ----------------------------------------------------------------------------- start

# Each in its own session: Ctrl+C reaches only this script, which then stops them in order
# (workers first, so they hand their jobs back while the database is still there).
log "Starting the web server on $URL"
setsid "$PY" manage.py runserver "127.0.0.1:$PORT" --noreload >>"$WEB_LOG" 2>&1 </dev/null &
WEB_PID=$!
if [ "$HAS_WORKERS" = 1 ]; then
    log "Starting 2 workers"
    setsid "$PY" manage.py runworkers -n 2 --grace-period 10 -v 2 >>"$WORKERS_LOG" 2>&1 </dev/null &
    WORKERS_PID=$!
fi

page_answers() {
    "$PY" -c 'import sys, urllib.request
sys.exit(0 if urllib.request.urlopen(sys.argv[1], timeout=2).status == 200 else 1)' "$1" \
        >/dev/null 2>&1
}

for _ in $(seq 1 100); do
    page_answers "$URL/" && break
    kill -0 "$WEB_PID" 2>/dev/null || break
    sleep 0.2
done
if ! page_answers "$URL/"; then
    echo "The web server did not answer on $URL." >&2
    [ "$CHECK" = 0 ] || tail -n 40 "$WEB_LOG" >&2
    exit 1
fi

enqueue_some() {
    log "Enqueueing some jobs"
    manage enqueue_demo_jobs --emails 3 --reports 1 --syncs 4
}

# ----------------------------------------------------------------------------- run

if [ "$CHECK" = 0 ]; then
    cat <<EOF

  The demo shop:  $URL/
  Admin:          $URL/admin/   (user: demo  password: $DEMO_PASSWORD)
  Jobs:           $URL/admin/django_sqlqueue/job/
  Queue summary:  (cd example_project && $PY manage.py jobstatus)

  Welcome emails are printed below by the workers. Press Ctrl+C to stop everything.

EOF
    enqueue_some
    # Returns when either process ends, or when Ctrl+C runs the INT trap.
    if [ -n "$WORKERS_PID" ]; then
        wait -n "$WEB_PID" "$WORKERS_PID" || true
    else
        wait "$WEB_PID" || true
    fi
    warn "a process of the demo stopped by itself; stopping the others"
    exit 1
fi

enqueue_some
failures=0
fail() { echo "CHECK FAILED: $*" >&2; failures=$((failures + 1)); }

log "Checking the page: it answers, and its buttons enqueue jobs"
DEMO_USER=demo DEMO_PASSWORD="$DEMO_PASSWORD" "$PY" "$PROJECT_DIR/smoke_check.py" "$URL" || fail "the page did not work (see above)"

if [ "$HAS_WORKERS" = 1 ]; then
    log "Waiting for at least $WANT_COMPLETED completed jobs (at most ${CHECK_SECONDS}s)"
    completed=0
    deadline=$((SECONDS + CHECK_SECONDS))
    while [ "$SECONDS" -lt "$deadline" ]; do
        status_json="$(manage jobstatus --json)"
        completed="$("$PY" -c 'import json, sys; print(json.loads(sys.argv[1])["completed"])' "$status_json")"
        [ "$completed" -ge "$WANT_COMPLETED" ] && break
        kill -0 "$WORKERS_PID" 2>/dev/null || break
        sleep 1
    done
    echo "jobstatus: $status_json"
    [ "$completed" -ge "$WANT_COMPLETED" ] || fail "only $completed jobs completed"
else
    fail "no runworkers command, so no job can complete"
fi

kill -0 "$WEB_PID" 2>/dev/null || fail "the web server stopped by itself"
[ -z "$WORKERS_PID" ] || kill -0 "$WORKERS_PID" 2>/dev/null || fail "the workers stopped by themselves"
stop_all
[ -z "$WORKERS_PID" ] || [ "$WORKERS_EXIT" = 0 ] || fail "runworkers exited with $WORKERS_EXIT after SIGTERM"
final="$(manage jobstatus --json)"
echo "after stopping: $final"
running="$("$PY" -c 'import json, sys; print(json.loads(sys.argv[1])["running"])' "$final")"
[ "$running" = 0 ] || fail "$running jobs still 'running' after the workers stopped"

if [ "$failures" -gt 0 ]; then
    echo "--- web server log (last 30 lines)" >&2
    tail -n 30 "$WEB_LOG" >&2 || true
    echo "--- workers log (last 60 lines)" >&2
    tail -n 60 "$WORKERS_LOG" >&2 || true
    echo "demo check: $failures problem(s)" >&2
    exit 1
fi
echo "demo check: OK (page answers, $completed jobs completed, clean shutdown)"
