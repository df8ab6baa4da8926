#!/usr/bin/env bash
# The whole test suite, on a fresh machine that has only Python: builds the venvs from
# pyproject.toml, lints, checks migrations and docs, then runs pytest on every stack and
# database of the support matrix. Prints a summary; exits non-zero if anything failed.
#
#   scripts/test.sh                     # everything (what CI runs)
#   scripts/test.sh --quick             # Python 3.12 + Django 6.1 on SQLite only
#   scripts/test.sh --db postgres       # only this database (repeatable)
#   scripts/test.sh --stack py311-dj52  # only this stack (repeatable)
#   scripts/test.sh --jobs 1            # one pytest run at a time, output live (default: 2)
#   scripts/test.sh -- -k purge -x      # extra pytest arguments for every run
#
# In CI (CI=true) a database server that does not answer is a failure; elsewhere its runs are
# skipped with a warning.
set -uo pipefail

# shellcheck source-path=SCRIPTDIR source=_venv.sh
source "$(dirname "${BASH_SOURCE[0]}")/_venv.sh"
cd "$REPO_ROOT" || exit 1

# Stacks: name, interpreter finder, pip arguments, databases.
STACKS=(py312-dj61 py311-dj52 py312-dj60)
declare -A STACK_PYTHON=(
    [py312-dj61]=find_python312
    [py311-dj52]=find_python311
    [py312-dj60]=find_python312
)
declare -A STACK_PIP=(
    [py312-dj61]='-e .[dev,browser] Django>=6.1,<6.2'
    [py311-dj52]='-e .[postgres,test,tasks-backport,browser] Django>=5.2,<5.3'
    [py312-dj60]='-e .[test,browser] Django>=6.0,<6.1'
)
declare -A STACK_DBS=(
    [py312-dj61]='sqlite postgres mysql'
    [py311-dj52]='sqlite postgres'
    [py312-dj60]='sqlite'
)
declare -A STACK_TAG=([py312-dj61]=a [py311-dj52]=b [py312-dj60]=c)
# The stack that lints, builds the docs and carries the dev tools.
MAIN_STACK=py312-dj61
PYTEST_TIMEOUT="${SQLQUEUE_PYTEST_TIMEOUT:-1200}"
# pytest runs at a time (--jobs N); with 1, each run's output streams as it comes.
PARALLEL="${SQLQUEUE_TEST_PARALLEL:-2}"

usage() { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; }

ONLY_STACKS=()
ONLY_DBS=()
PYTEST_ARGS=()
QUICK=0
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --db) ONLY_DBS+=("$2"); shift ;;
        --stack) ONLY_STACKS+=("$2"); shift ;;
        --jobs) PARALLEL="$2"; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; PYTEST_ARGS=("$@"); break ;;
        *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
if [ "$QUICK" = 1 ]; then
    ONLY_STACKS=("$MAIN_STACK")
    ONLY_DBS=(sqlite)
fi
for stack in "${ONLY_STACKS[@]}"; do
    [ -n "${STACK_TAG[$stack]:-}" ] || { echo "unknown stack: $stack (${STACKS[*]})" >&2; exit 2; }
done
case "$PARALLEL" in '' | *[!0-9]* | 0) echo "--jobs needs a positive number" >&2; exit 2 ;; esac
for db in "${ONLY_DBS[@]}"; do
    case "$db" in sqlite | postgres | mysql) ;; *) echo "unknown database: $db" >&2; exit 2 ;; esac
done

contains() { # contains VALUE ITEM...: true if VALUE is one of the items
    local value="$1" item
    shift
    for item in "$@"; do [ "$item" = "$value" ] && return 0; done
    return 1
}

selected() { # selected VALUE FILTER... : true if no filter, or VALUE is in it
    local value="$1"
    shift
    [ $# -eq 0 ] && return 0
    local item
    for item in "$@"; do [ "$item" = "$value" ] && return 0; done
    return 1
}

RUN_TMP="$(mktemp -d "${TMPDIR:-/tmp}/sqlqueue-testrun.XXXXXX")"
trap 'rm -rf "$RUN_TMP"' EXIT
RUN_ID="${SQLQUEUE_TEST_ID:-t}$$"
IS_CI=0
[ "${CI:-}" = "true" ] || [ "${CI:-}" = "1" ] && IS_CI=1

# ----------------------------------------------------------------------------- results

STEP_NAMES=()
STEP_RESULTS=()
STEP_SECONDS=()
STEP_NOTES=()
TOTAL_PASSED=0
TOTAL_FAILED=0
TOTAL_SKIPPED=0

record() { # record NAME RESULT SECONDS NOTE
    STEP_NAMES+=("$1")
    STEP_RESULTS+=("$2")
    STEP_SECONDS+=("$3")
    STEP_NOTES+=("$4")
    case "$2" in
        FAIL) printf '%s==> FAIL: %s %s%s\n' "$C_RED" "$1" "$4" "$C_OFF" ;;
        SKIP) printf '%s==> SKIP: %s %s%s\n' "$C_YELLOW" "$1" "$4" "$C_OFF" ;;
    esac
}

# step NAME COMMAND...: run, time and record a command that passes or fails.
step() {
    local name="$1" started=$SECONDS
    shift
    log "$name"
    if "$@"; then
        record "$name" PASS $((SECONDS - started)) ""
    else
        record "$name" FAIL $((SECONDS - started)) "(exit $?)"
    fi
}

count_of() { # count_of WORD LINE: the number before WORD in pytest's closing line
    grep -oE "[0-9]+ $2" <<<"$1" | head -n1 | cut -d' ' -f1
}

# ----------------------------------------------------------------------------- steps

declare -A STACK_PY=()

build_stack() {
    local stack="$1" python started=$SECONDS
    python="$(${STACK_PYTHON[$stack]})"
    if [ -z "$python" ]; then
        record "venv $stack" FAIL 0 "(no interpreter found for this stack)"
        return
    fi
    # The dev extra carries mysqlclient, which compiles against the MariaDB client library.
    if [[ "${STACK_PIP[$stack]}" == *dev* ]] && ! ensure_mysql_build_deps; then
        warn "could not install the MariaDB client headers; mysqlclient will not build"
    fi
    local venv_python
    # shellcheck disable=SC2086  # the pip arguments are split on purpose
    if venv_python="$(ensure_venv "$stack" "$python" ${STACK_PIP[$stack]})"; then
        STACK_PY[$stack]="$venv_python"
        local django
        django="$("$venv_python" -c 'import django; print(django.get_version())' 2>&1)"
        record "venv $stack" PASS $((SECONDS - started)) "($("$venv_python" -V 2>&1), Django $django)"
    else
        record "venv $stack" FAIL $((SECONDS - started)) "(pip install failed)"
    fi
}

lint() {
    local bin
    bin="$(dirname "${STACK_PY[$MAIN_STACK]}")"
    step "ruff check" "$bin/ruff" check .
    step "ruff format --check" "$bin/ruff" format --check .
}

migrations_check() {
    local stack="$1"
    step "makemigrations --check ($stack)" env PYTHONPATH="$REPO_ROOT" \
        DJANGO_SETTINGS_MODULE=tests.settings SQLQUEUE_TEST_DB=sqlite \
        SQLQUEUE_TEST_TMP="$RUN_TMP" "${STACK_PY[$stack]}" -m django \
        makemigrations --check --dry-run
}

# The benchmark harness's own logic (planning, exactly-once checks, statistics): no servers.
harness_tests() {
    step "benchmark harness tests" env PYTHONPATH="$REPO_ROOT" SQLQUEUE_TEST_DB=sqlite \
        SQLQUEUE_TEST_TMP="$RUN_TMP" "${STACK_PY[$MAIN_STACK]}" -m pytest -q -p no:cacheprovider \
        benchmarks/tests
}

docs_build() {
    if [ ! -f mkdocs.yml ]; then
        return
    fi
    local bin
    bin="$(dirname "${STACK_PY[$MAIN_STACK]}")"
    step "mkdocs build --strict" "$bin/mkdocs" build --strict -q -f mkdocs.yml \
        --site-dir "$RUN_TMP/site"
}

# The chaos/soak harness (docs/reliability.md), short mode, on every database that answers:
# workers SIGKILLed, a supervisor killed, connections cut, and every guarantee checked.
chaos_run() {
    local dbs=() db
    for db in sqlite postgres mysql; do
        selected "$db" "${ONLY_DBS[@]}" || continue
        [ "${DB_UP[$db]:-0}" = 1 ] && dbs+=("$db")
    done
    [ ${#dbs[@]} -gt 0 ] || return 0
    local joined
    joined="$(IFS=,; echo "${dbs[*]}")"
    step "chaos harness ($joined)" env PYTHONPATH="$REPO_ROOT" "${STACK_PY[$MAIN_STACK]}" \
        -m benchmarks.chaos --db "$joined" --seconds 60 --db-name "chaos_sqlqueue_$RUN_ID" \
        --out "$RUN_TMP/chaos"
}

declare -A DB_UP=([sqlite]=1)

check_database_server() {
    local db="$1" started=$SECONDS
    if bash scripts/check_services.sh "$db"; then
        DB_UP[$db]=1
        record "$db server" PASS $((SECONDS - started)) ""
    elif [ "$IS_CI" = 1 ]; then
        DB_UP[$db]=0
        record "$db server" FAIL $((SECONDS - started)) "(does not answer; required in CI)"
    else
        DB_UP[$db]=0
        record "$db server" SKIP $((SECONDS - started)) "(does not answer; its test runs are skipped)"
    fi
}

# pytest_job STACK DB: run pytest; its output goes to RUN_TMP/pytest-STACK-DB.log and, when
# runs are not parallel, to the terminal as it comes. Writes the exit code and duration to
# RUN_TMP/pytest-STACK-DB.status.
pytest_job() {
    local stack="$1" db="$2" started=$SECONDS status color=no
    local log_file="$RUN_TMP/pytest-$stack-$db.log"
    [ -t 1 ] && [ "$PARALLEL" = 1 ] && color=yes
    mkdir -p "$RUN_TMP/$stack-$db"
    SQLQUEUE_TEST_DB="$db" \
        SQLQUEUE_TEST_ID="${RUN_ID}${STACK_TAG[$stack]}_${db}" \
        SQLQUEUE_TEST_TMP="$RUN_TMP/$stack-$db" \
        timeout --foreground -k 30 "$PYTEST_TIMEOUT" \
        "${STACK_PY[$stack]}" -m pytest --color="$color" "${PYTEST_ARGS[@]}" </dev/null 2>&1 |
        if [ "$PARALLEL" = 1 ]; then tee "$log_file"; else cat >"$log_file"; fi
    status=${PIPESTATUS[0]}
    echo "$status $((SECONDS - started))" >"$RUN_TMP/pytest-$stack-$db.status"
}

# pytest_result STACK DB: record how a finished pytest_job went, from its log and status.
pytest_result() {
    local stack="$1" db="$2" name="pytest $1 $2"
    local log_file="$RUN_TMP/pytest-$stack-$db.log" status seconds
    read -r status seconds <"$RUN_TMP/pytest-$stack-$db.status"
    # pytest's closing line: "==== 3 failed, 120 passed, 2 skipped in 41.2s ====".
    local closing passed failed errors skipped note
    closing="$(grep -E '^=+ .* in [0-9.]+s' "$log_file" | tail -n1 | tr -d '=' | sed 's/^ *//;s/ *$//')"
    passed="$(count_of "$closing" passed)"
    failed="$(count_of "$closing" failed)"
    errors="$(count_of "$closing" 'errors?')"
    skipped="$(count_of "$closing" skipped)"
    TOTAL_PASSED=$((TOTAL_PASSED + ${passed:-0}))
    TOTAL_FAILED=$((TOTAL_FAILED + ${failed:-0} + ${errors:-0}))
    TOTAL_SKIPPED=$((TOTAL_SKIPPED + ${skipped:-0}))
    note="${closing:-(no closing line)}"
    case "$status" in
        0) record "$name" PASS "$seconds" "$note" ;;
        5) record "$name" FAIL "$seconds" "(pytest collected no tests) $note" ;;
        124 | 137) record "$name" FAIL "$seconds" "(timed out after ${PYTEST_TIMEOUT}s)" ;;
        *) record "$name" FAIL "$seconds" "(exit $status) $note" ;;
    esac
}

# run_all_pytest "STACK DB"...: every run, PARALLEL at a time. Most of a run's time is spent
# waiting on worker processes and timers, not CPU, so two runs at once take about half as long.
run_all_pytest() {
    local runs=() run stack db
    for run in "$@"; do
        read -r stack db <<<"$run"
        if [ -z "${STACK_PY[$stack]:-}" ]; then
            record "pytest $stack $db" FAIL 0 "(no venv)"
        elif [ "${DB_UP[$db]:-0}" != 1 ]; then
            if [ "$IS_CI" = 1 ]; then
                record "pytest $stack $db" FAIL 0 "($db does not answer)"
            else
                record "pytest $stack $db" SKIP 0 "($db does not answer)"
            fi
        else
            runs+=("$run")
        fi
    done
    [ ${#runs[@]} -gt 0 ] || return 0
    [ ${#runs[@]} -gt 1 ] || PARALLEL=1
    if [ "$PARALLEL" = 1 ]; then
        for run in "${runs[@]}"; do
            read -r stack db <<<"$run"
            log "pytest $stack $db"
            pytest_job "$stack" "$db"
        done
    else
        log "Running ${#runs[@]} pytest runs, $PARALLEL at a time; each one's output follows when it ends"
        declare -A pid_run=()
        local next=0 finished
        while [ "$next" -lt ${#runs[@]} ] || [ ${#pid_run[@]} -gt 0 ]; do
            if [ "$next" -lt ${#runs[@]} ] && [ ${#pid_run[@]} -lt "$PARALLEL" ]; then
                read -r stack db <<<"${runs[$next]}"
                echo "started: pytest $stack $db"
                pytest_job "$stack" "$db" &
                pid_run[$!]="${runs[$next]}"
                next=$((next + 1))
                continue
            fi
            wait -n -p finished "${!pid_run[@]}" || true
            read -r stack db <<<"${pid_run[$finished]}"
            unset "pid_run[$finished]"
            log "pytest $stack $db: output"
            cat "$RUN_TMP/pytest-$stack-$db.log"
        done
    fi
    for run in "${runs[@]}"; do
        read -r stack db <<<"$run"
        pytest_result "$stack" "$db"
    done
}

summary() {
    local i failed=0 total=${#STEP_NAMES[@]} colour
    echo
    log "Summary (${SECONDS}s in all)"
    for ((i = 0; i < total; i++)); do
        case "${STEP_RESULTS[$i]}" in
            PASS) colour="$C_GREEN" ;;
            FAIL) colour="$C_RED" failed=$((failed + 1)) ;;
            *) colour="$C_YELLOW" ;;
        esac
        printf '  %s%-4s%s  %-36s %5ss  %s\n' "$colour" "${STEP_RESULTS[$i]}" "$C_OFF" \
            "${STEP_NAMES[$i]}" "${STEP_SECONDS[$i]}" "${STEP_NOTES[$i]}"
    done
    if [ "$failed" -eq 0 ]; then
        printf '%stest.sh: all %s steps passed in %ss%s\n' "$C_GREEN" "$total" "$SECONDS" "$C_OFF"
    else
        printf '%stest.sh: %s of %s steps FAILED in %ss%s\n' "$C_RED" "$failed" "$total" \
            "$SECONDS" "$C_OFF"
    fi
    # Last, alone on its line: the totals over every pytest run.
    echo "total: $TOTAL_PASSED passed, $TOTAL_FAILED failed, $TOTAL_SKIPPED skipped"
    [ "$failed" -eq 0 ]
}

# ----------------------------------------------------------------------------- main

main() {
    local stack db wanted_dbs=() stacks=() runs=()
    for stack in "${STACKS[@]}"; do
        selected "$stack" "${ONLY_STACKS[@]}" && stacks+=("$stack")
    done
    for stack in "${stacks[@]}"; do
        for db in ${STACK_DBS[$stack]}; do
            selected "$db" "${ONLY_DBS[@]}" || continue
            runs+=("$stack $db")
            contains "$db" "${wanted_dbs[@]}" || wanted_dbs+=("$db")
        done
    done
    # The main stack carries ruff and mkdocs, so it is always built.
    contains "$MAIN_STACK" "${stacks[@]}" || build_stack "$MAIN_STACK"
    for stack in "${stacks[@]}"; do
        build_stack "$stack"
    done
    if [ -n "${STACK_PY[$MAIN_STACK]:-}" ]; then
        lint
        harness_tests
        [ "$QUICK" = 1 ] || docs_build
    fi
    for stack in "${stacks[@]}"; do
        [ -z "${STACK_PY[$stack]:-}" ] || migrations_check "$stack"
    done
    for db in "${wanted_dbs[@]}"; do
        [ "$db" = sqlite ] || check_database_server "$db"
    done
    if [ -f scripts/install_browser.sh ]; then
        step "install browser" bash scripts/install_browser.sh
    fi
    run_all_pytest "${runs[@]}"
    if [ "$QUICK" != 1 ] && [ -n "${STACK_PY[$MAIN_STACK]:-}" ]; then
        chaos_run
    fi
    summary
}

main
