#!/usr/bin/env bash
# The whole test suite, on a fresh machine that has only Python: builds the venvs from
# pyproject.toml, lints, type-checks the package (mypy), checks migrations and docs, then runs
# pytest on every stack and database of the support matrix. Prints a summary; exits non-zero
# if anything failed.
#
#   scripts/test.sh                     # everything (what CI runs), the Wagtail test included
#   scripts/test.sh --quick             # Python 3.12 + Django 6.1 on SQLite only
#   scripts/test.sh --db postgres       # only this database (repeatable)
#   scripts/test.sh --stack py311-dj52  # only this stack (repeatable; alone, its whole suite)
#   scripts/test.sh --conformance       # only the django.tasks conformance suite, every run
#   scripts/test.sh --all-lines         # the whole suite on every stack's databases
#   scripts/test.sh --screenshots       # regenerate docs/img/admin-*.png (browser test, SQLite)
#   scripts/test.sh --jobs 1            # one pytest run or harness at a time, output live (default: 2)
#   scripts/test.sh --wagtail           # only the Wagtail integration test (--db narrows it)
#   scripts/test.sh -- -k purge -x      # extra pytest arguments for every run
#
# The newest Django line (MAIN_STACK) runs the whole suite on every database. The other lines
# run only what can differ between Django lines (LINE_TESTS: the django.tasks conformance suite
# and backend, the backport, migrations, the admin's templates, commands and checks, the testing
# helpers, the worker's signal handling) on their databases, and the conformance suite alone on
# the others, so that every Django line meets every database. --all-lines runs the whole suite
# on every stack's databases instead.
# In CI (CI=true) a database server that does not answer is a failure; elsewhere its runs are
# skipped with a warning.
set -uo pipefail

# `wait -n -p` (parallel pytest runs) came with bash 5.1.
if ((BASH_VERSINFO[0] < 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] < 1))); then
    echo "scripts/test.sh needs bash 5.1 or newer; this is bash $BASH_VERSION." >&2
    exit 2
fi

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
# The 6.1 stack also has the django-tasks backport, as projects with a library built on it
# (Wagtail) do on Django 6.x; the 6.0 stack runs without it.
declare -A STACK_PIP=(
    [py312-dj61]='-e .[dev,browser,tasks-backport] Django>=6.1,<6.2'
    [py311-dj52]='-e .[postgres,mysql,test,tasks-backport,browser] Django>=5.2,<5.3'
    [py312-dj60]='-e .[postgres,mysql,test,browser] Django>=6.0,<6.1'
)
declare -A STACK_DBS=(
    [py312-dj61]='sqlite postgres mysql'
    [py311-dj52]='sqlite postgres'
    [py312-dj60]='sqlite'
)
# The tests that may behave differently on another Django (or Python) line. Decided from what
# has differed: every failure seen on one line only was a timing flake in a worker test, and
# every real difference between lines is in django.tasks (6.x against the 5.2 backport), the
# migrations, the admin's templates and Django's command and check machinery; Python 3.11
# against 3.12 matters to the worker's signal handling (tests/runtime, test_shutdown.py).
LINE_TESTS=(
    tests/tasks_conformance
    tests/test_tasks_backend.py
    tests/test_tasks_backend_results.py
    tests/test_tasks_backend_workers.py
    tests/test_tasks_backport_on_6x.py
    tests/test_tasks_checks_project.py
    tests/test_migrations.py
    tests/test_migration_0012.py
    tests/test_admin
    tests/scheduling/test_admin.py
    tests/browser
    tests/test_banner.py
    tests/test_checks.py
    tests/test_commands.py
    tests/test_testing_helpers.py
    tests/test_testing_project.py
    tests/runtime
    tests/workers/test_shutdown.py
)
# Databases where a stack runs only the conformance suite (a few seconds, not the whole suite).
declare -A STACK_CONFORMANCE_DBS=(
    [py312-dj61]=''
    [py311-dj52]='mysql'
    [py312-dj60]='postgres mysql'
)
CONFORMANCE_TESTS=tests/tasks_conformance
declare -A STACK_TAG=([py312-dj61]=a [py311-dj52]=b [py312-dj60]=c)
# The stack that lints, builds the docs and carries the dev tools.
MAIN_STACK=py312-dj61
# A stuck run's backstop, not a speed check: one PostgreSQL run took 803 s on a good day and
# was still at 58 % after 1,200 s on a day this machine's fsync took 1.2 ms (2026-12-03).
PYTEST_TIMEOUT="${SQLQUEUE_PYTEST_TIMEOUT:-2700}"
# pytest runs at a time (--jobs N); with 1, each run's output streams as it comes.
PARALLEL="${SQLQUEUE_TEST_PARALLEL:-2}"

usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; }

ONLY_STACKS=()
ONLY_DBS=()
PYTEST_ARGS=()
QUICK=0
ALL_LINES=0
CONFORMANCE_ONLY=0
WAGTAIL_ONLY=0
SCREENSHOTS=0
while [ $# -gt 0 ]; do
    case "$1" in
        --quick) QUICK=1 ;;
        --conformance) CONFORMANCE_ONLY=1 ;;
        --all-lines) ALL_LINES=1 ;;
        --wagtail) WAGTAIL_ONLY=1 ;;
        --screenshots) SCREENSHOTS=1 ;;
        --db) ONLY_DBS+=("$2"); shift ;;
        --stack) ONLY_STACKS+=("$2"); shift ;;
        --jobs) PARALLEL="$2"; shift ;;
        -h | --help) usage; exit 0 ;;
        --) shift; PYTEST_ARGS=("$@"); break ;;
        *) echo "unknown argument: $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done
# Screenshots are tracked files: only this option rewrites them; otherwise the browser test
# writes its screenshots to a temporary folder.
if [ "$SCREENSHOTS" = 1 ]; then
    QUICK=1
    export SQLQUEUE_SCREENSHOTS="$REPO_ROOT/docs/img"
    [ ${#PYTEST_ARGS[@]} -gt 0 ] || PYTEST_ARGS=(tests/browser)
else
    unset SQLQUEUE_SCREENSHOTS
fi
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

# Byte-compile the checkout for this interpreter once: where PYTHONDONTWRITEBYTECODE is set
# (this machine sets it), every process the suite spawns would otherwise compile the modules it
# imports from source, ~90 ms each (a subset of the worker tests ran 13 % faster). A module
# that does not compile is left to the pytest run, which reports it properly.
byte_compile() {
    "$1" -m compileall -q -j 0 django_sqlqueue tests benchmarks example_project >/dev/null 2>&1 ||
        warn "byte-compiling the checkout with $1 failed; the pytest runs will say where"
}

# mysqlclient (the mysql extra, also in dev) compiles against the MariaDB client library.
mysql_build_deps() {
    ensure_mysql_build_deps || warn "could not install the MariaDB client headers; mysqlclient will not build"
}

build_stack() {
    local stack="$1" python started=$SECONDS
    local want="${STACK_PYTHON[$stack]#find_python}"
    python="$(${STACK_PYTHON[$stack]})"
    if [ -z "$python" ] && install_python "$want"; then
        python="$(${STACK_PYTHON[$stack]})"
    fi
    if [ -z "$python" ]; then
        record "venv $stack" FAIL 0 "(no Python ${want:0:1}.${want:1} found: pyenv or PATH)"
        return
    fi
    [[ "${STACK_PIP[$stack]}" =~ dev|mysql ]] && mysql_build_deps
    local venv_python
    # shellcheck disable=SC2086  # the pip arguments are split on purpose
    if venv_python="$(ensure_venv "$stack" "$python" ${STACK_PIP[$stack]})"; then
        STACK_PY[$stack]="$venv_python"
        byte_compile "$venv_python"
        local django
        django="$("$venv_python" -c 'import django; print(django.get_version())' 2>&1)"
        record "venv $stack" PASS $((SECONDS - started)) "($("$venv_python" -V 2>&1), Django $django)"
    else
        record "venv $stack" FAIL $((SECONDS - started)) "(pip install failed)"
    fi
}

# prebuild_venvs STACK...: build these stacks' venvs, and Wagtail's when the run will use it,
# side by side, then wait for them all; build_stack finds each one ready (or builds it again,
# and says why, if its build here failed). pip spends much of a build on downloads and
# unpacking: one after another, the four took 98 + 48 + 45 + 93 s on 2026-12-04.
prebuild_venvs() {
    local stack python pids=() names=() failed=() i started=$SECONDS
    if [ "$#" -lt 2 ] && [ "$WAGTAIL_RUN" != 1 ]; then
        return 0
    fi
    mysql_build_deps
    log "Building the venvs side by side: $* $([ "$WAGTAIL_RUN" = 1 ] && echo wagtail)"
    for stack in "$@"; do
        python="$(${STACK_PYTHON[$stack]})"
        [ -n "$python" ] || continue  # build_stack installs it, or says it is missing
        # shellcheck disable=SC2086  # the pip arguments are split on purpose
        ensure_venv "$stack" "$python" ${STACK_PIP[$stack]} >/dev/null 2>"$RUN_TMP/venv-$stack.log" &
        pids+=($!)
        names+=("$stack")
    done
    if [ "$WAGTAIL_RUN" = 1 ] && python="$(find_python312)" && [ -n "$python" ]; then
        ensure_venv wagtail "$python" "${WAGTAIL_PIP[@]}" >/dev/null 2>"$RUN_TMP/venv-wagtail.log" &
        pids+=($!)
        names+=(wagtail)
    fi
    for i in "${!pids[@]}"; do
        wait "${pids[$i]}" || failed+=("${names[$i]}")
    done
    # The build's own time, in the summary: the "venv" steps after it only find what it built.
    # A build that failed here is not a failure yet: its stack's step builds it again.
    record "venvs side by side" PASS $((SECONDS - started)) \
        "(${names[*]}${failed[*]:+; failed here, built again below: ${failed[*]}})"
}

lint() {
    local bin
    bin="$(dirname "${STACK_PY[$MAIN_STACK]}")"
    step "ruff check" "$bin/ruff" check .
    step "ruff format --check" "$bin/ruff" format --check .
    type_check
}

# mypy with django-stubs on the package ([tool.mypy] in pyproject.toml): any error fails the
# run. Its Django plugin loads tests.settings, on SQLite so that no server is needed.
type_check() {
    local bin
    bin="$(dirname "${STACK_PY[$MAIN_STACK]}")"
    step "mypy django_sqlqueue" env PYTHONPATH="$REPO_ROOT" SQLQUEUE_TEST_DB=sqlite \
        SQLQUEUE_TEST_TMP="$RUN_TMP" "$bin/mypy"
}

migrations_check() {
    local stack="$1"
    step "makemigrations --check ($stack)" env PYTHONPATH="$REPO_ROOT" \
        DJANGO_SETTINGS_MODULE=tests.settings SQLQUEUE_TEST_DB=sqlite \
        SQLQUEUE_TEST_TMP="$RUN_TMP" "${STACK_PY[$stack]}" -m django \
        makemigrations --check --dry-run
}

# The benchmark harnesses' own logic (planning, exactly-once checks, statistics, cluster
# attribution): no servers. The full run adds the slow ones (a short real cluster run).
harness_tests() {
    local marks=()
    [ "$QUICK" = 1 ] && marks=(-m "not slow")
    step "benchmark harness tests" env PYTHONPATH="$REPO_ROOT" SQLQUEUE_TEST_DB=sqlite \
        SQLQUEUE_TEST_TMP="$RUN_TMP" "${STACK_PY[$MAIN_STACK]}" -m pytest -q -p no:cacheprovider \
        "${marks[@]}" benchmarks/tests
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

# The sdist and the wheel a release would upload: built (the wheel from the sdist), twine
# check --strict, every package file inside, and the installed wheel passing Django's checks
# (tests/packaging). Full runs only.
package_check() {
    step "build sdist + wheel, twine check" env PYTHONPATH="$REPO_ROOT" SQLQUEUE_TEST_PACKAGING=1 \
        SQLQUEUE_TEST_DB=sqlite SQLQUEUE_TEST_TMP="$RUN_TMP" "${STACK_PY[$MAIN_STACK]}" -m pytest \
        -q -p no:cacheprovider tests/packaging
}

# up_databases: the selected databases whose server answers, as a comma list.
up_databases() {
    local dbs=() db
    for db in sqlite postgres mysql; do
        selected "$db" "${ONLY_DBS[@]}" || continue
        [ "${DB_UP[$db]:-0}" = 1 ] && dbs+=("$db")
    done
    (IFS=,; echo "${dbs[*]}")
}

# The chaos/soak harness (docs/reliability.md), short mode, on every database that answers:
# workers SIGKILLed, a supervisor killed, connections cut, and every guarantee checked.
chaos_run() {
    local joined
    joined="$(up_databases)"
    [ -n "$joined" ] || return 0
    step "chaos harness ($joined)" env PYTHONPATH="$REPO_ROOT" "${STACK_PY[$MAIN_STACK]}" \
        -m benchmarks.chaos --db "$joined" --seconds 60 --db-name "chaos_sqlqueue_$RUN_ID" \
        --out "$RUN_TMP/chaos"
}

# The chaos harness's --misbehave mode (docs/reliability.md), short, on every database that
# answers: misbehaving handlers (open transactions, forks, os._exit(0), lingering threads,
# results over MAX_RESULT_BYTES, the GIL held past the lease) among normal jobs; each must
# end as documented, normal jobs run once, no worker slot stays empty.
misbehave_run() {
    local joined
    joined="$(up_databases)"
    [ -n "$joined" ] || return 0
    step "chaos --misbehave ($joined)" env PYTHONPATH="$REPO_ROOT" "${STACK_PY[$MAIN_STACK]}" \
        -m benchmarks.chaos --misbehave --db "$joined" --seconds 20 \
        --db-name "chaos_misbehave_$RUN_ID" --out "$RUN_TMP/chaos-misbehave"
    # With slots, an os._exit(0) also costs the jobs in flight beside it an attempt each:
    # once more on SQLite, the default database, with four slots per process.
    if [ "${DB_UP[sqlite]:-0}" = 1 ] && selected sqlite "${ONLY_DBS[@]}"; then
        step "chaos --misbehave --concurrency 4 (sqlite)" env PYTHONPATH="$REPO_ROOT" \
            "${STACK_PY[$MAIN_STACK]}" -m benchmarks.chaos --misbehave --concurrency 4 \
            --db sqlite --seconds 20 --db-name "chaos_misbehave_slots_$RUN_ID" \
            --out "$RUN_TMP/chaos-misbehave-slots"
    fi
}

# Wagtail, a real client of django.tasks, on our backend (tests/integration, docs/tasks.md):
# its own venv from the wagtail-it extra, Django 6.1, PostgreSQL and SQLite. In the full run
# only; --db narrows it, --stack and --quick leave it out. In CI nothing may be missing: the
# test fails where it would skip elsewhere. The timeout is a stuck run's backstop, not a speed
# check: on a day this machine's CPU ran 3.7 times slower than usual (2026-12-04), the test was
# still completing tasks when 300 s ran out, beside the chaos harnesses.
WAGTAIL_TIMEOUT=900
WAGTAIL_PIP=(-e '.[wagtail-it]' 'Django>=6.1,<6.2')
# Whether this run includes the Wagtail test (main sets it).
WAGTAIL_RUN=0
wagtail_integration() {
    local dbs=() db
    for db in postgres sqlite; do
        selected "$db" "${ONLY_DBS[@]}" && dbs+=("$db")
    done
    [ ${#dbs[@]} -gt 0 ] || return 0
    local name="wagtail integration (${dbs[*]})" started=$SECONDS python venv_python
    log "$name"
    python="$(find_python312)"
    if [ -z "$python" ]; then
        record "$name" FAIL 0 "(no Python 3.12 found)"
        return
    fi
    if ! venv_python="$(ensure_venv wagtail "$python" "${WAGTAIL_PIP[@]}")"; then
        record "$name" FAIL $((SECONDS - started)) "(pip install failed)"
        return
    fi
    local log_file="$RUN_TMP/wagtail.log" status selection
    selection="$(printf '%s or ' "${dbs[@]}")"
    selection="${selection% or }"
    SQLQUEUE_INTEGRATION=1 SQLQUEUE_TEST_ID="${RUN_ID}w" \
        timeout --foreground -k 30 "$WAGTAIL_TIMEOUT" "$venv_python" -m pytest -p no:cacheprovider \
        --confcutdir tests/integration -W ignore::pytest.PytestConfigWarning -s -rsxX \
        -k "$selection" tests/integration </dev/null 2>&1 | tee "$log_file"
    status=${PIPESTATUS[0]}
    local closing passed failed errors skipped
    closing="$(grep -E '^=+ .* in [0-9.]+s' "$log_file" | tail -n1 | tr -d '=' | sed 's/^ *//;s/ *$//')"
    passed="$(count_of "$closing" passed)"
    failed="$(count_of "$closing" failed)"
    errors="$(count_of "$closing" 'errors?')"
    skipped="$(count_of "$closing" skipped)"
    TOTAL_PASSED=$((TOTAL_PASSED + ${passed:-0}))
    TOTAL_FAILED=$((TOTAL_FAILED + ${failed:-0} + ${errors:-0}))
    TOTAL_SKIPPED=$((TOTAL_SKIPPED + ${skipped:-0}))
    case "$status" in
        0) record "$name" PASS $((SECONDS - started)) "${closing:-}" ;;
        124 | 137) record "$name" FAIL $((SECONDS - started)) "(timed out after ${WAGTAIL_TIMEOUT}s)" ;;
        *) record "$name" FAIL $((SECONDS - started)) "(exit $status) ${closing:-}" ;;
    esac
}

# The cluster harness (docs/reliability.md): 3 hosts in network namespaces on a private
# PostgreSQL it starts itself, one host cut off past its lease, the server restarted. Needs
# root and PostgreSQL's server programs, not the shared server.
cluster_run() {
    selected postgres "${ONLY_DBS[@]}" || return 0
    step "cluster harness (3 hosts, partition)" env PYTHONPATH="$REPO_ROOT" \
        "${STACK_PY[$MAIN_STACK]}" -m benchmarks.cluster --hosts 3 --seconds 60 --partition \
        --restart-db --out "$RUN_TMP/cluster"
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

# run_name STACK DB SCOPE: how a pytest run is named in the log and the summary.
run_name() {
    case "$3" in
        conformance) echo "pytest $1 $2 (conformance)" ;;
        lines) echo "pytest $1 $2 (line tests)" ;;
        *) echo "pytest $1 $2" ;;
    esac
}

# pytest_job STACK DB SCOPE: run pytest, on the whole suite (SCOPE all), on the tests that can
# differ between Django lines (SCOPE lines) or on the conformance suite only (SCOPE conformance); its output goes to RUN_TMP/pytest-STACK-DB.log and, when
# runs are not parallel, to the terminal as it comes; its last lines list the slowest tests
# (over 5 s), for whoever keeps CI within its time budget. Writes the exit code and duration
# to RUN_TMP/pytest-STACK-DB.status.
pytest_job() {
    local stack="$1" db="$2" scope="$3" started=$SECONDS status color=no targets=()
    local log_file="$RUN_TMP/pytest-$stack-$db.log"
    [ "$scope" = conformance ] && targets=("$CONFORMANCE_TESTS")
    [ "$scope" = lines ] && targets=("${LINE_TESTS[@]}")
    [ -t 1 ] && [ "$PARALLEL" = 1 ] && color=yes
    mkdir -p "$RUN_TMP/$stack-$db"
    SQLQUEUE_TEST_DB="$db" \
        SQLQUEUE_TEST_ID="${RUN_ID}${STACK_TAG[$stack]}_${db}" \
        SQLQUEUE_TEST_TMP="$RUN_TMP/$stack-$db" \
        timeout --foreground -k 30 "$PYTEST_TIMEOUT" \
        "${STACK_PY[$stack]}" -m pytest --color="$color" --durations=15 --durations-min=5 \
        "${PYTEST_ARGS[@]}" "${targets[@]}" \
        </dev/null 2>&1 |
        if [ "$PARALLEL" = 1 ]; then tee "$log_file"; else cat >"$log_file"; fi
    status=${PIPESTATUS[0]}
    echo "$status $((SECONDS - started))" >"$RUN_TMP/pytest-$stack-$db.status"
}

# pytest_result STACK DB SCOPE: record how a finished pytest_job went, from its log and status.
pytest_result() {
    local stack="$1" db="$2" name
    name="$(run_name "$@")"
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

# run_all_pytest "STACK DB SCOPE"...: every run, PARALLEL at a time. Most of a run's time is
# spent waiting on worker processes and timers, not CPU, so two runs at once take about half
# as long.
run_all_pytest() {
    local runs=() run stack db scope name
    for run in "$@"; do
        read -r stack db scope <<<"$run"
        name="$(run_name "$stack" "$db" "$scope")"
        if [ -z "${STACK_PY[$stack]:-}" ]; then
            record "$name" FAIL 0 "(no venv)"
        elif [ "${DB_UP[$db]:-0}" != 1 ]; then
            if [ "$IS_CI" = 1 ]; then
                record "$name" FAIL 0 "($db does not answer)"
            else
                record "$name" SKIP 0 "($db does not answer)"
            fi
        else
            runs+=("$run")
        fi
    done
    [ ${#runs[@]} -gt 0 ] || return 0
    [ ${#runs[@]} -gt 1 ] || PARALLEL=1
    if [ "$PARALLEL" = 1 ]; then
        for run in "${runs[@]}"; do
            read -r stack db scope <<<"$run"
            log "$(run_name "$stack" "$db" "$scope")"
            pytest_job "$stack" "$db" "$scope"
        done
    else
        log "Running ${#runs[@]} pytest runs, $PARALLEL at a time; each one's output follows when it ends"
        declare -A pid_run=()
        local next=0 finished
        while [ "$next" -lt ${#runs[@]} ] || [ ${#pid_run[@]} -gt 0 ]; do
            if [ "$next" -lt ${#runs[@]} ] && [ ${#pid_run[@]} -lt "$PARALLEL" ]; then
                read -r stack db scope <<<"${runs[$next]}"
                echo "started: $(run_name "$stack" "$db" "$scope")"
                pytest_job "$stack" "$db" "$scope" &
                pid_run[$!]="${runs[$next]}"
                next=$((next + 1))
                continue
            fi
            wait -n -p finished "${!pid_run[@]}" || true
            read -r stack db scope <<<"${pid_run[$finished]}"
            unset "pid_run[$finished]"
            log "$(run_name "$stack" "$db" "$scope"): output"
            cat "$RUN_TMP/pytest-$stack-$db.log"
        done
    fi
    for run in "${runs[@]}"; do
        read -r stack db scope <<<"$run"
        pytest_result "$stack" "$db" "$scope"
    done
}

# run_lanes "FUNCTION..." "FUNCTION...": the functions of each argument one after another,
# each argument a lane; the lanes side by side when PARALLEL allows, else one after another.
# A lane's output is printed when it ends, and the steps it recorded are kept as if run here.
run_lanes() {
    local lane index=0 pids=() files=() fn
    if [ "$PARALLEL" = 1 ]; then
        for lane in "$@"; do
            for fn in $lane; do "$fn"; done
        done
        return
    fi
    for lane in "$@"; do
        [ -n "$lane" ] || continue
        index=$((index + 1))
        files+=("$RUN_TMP/lane-$index")
        run_lane "$RUN_TMP/lane-$index" $lane &
        pids+=($!)
    done
    [ ${#pids[@]} -gt 0 ] || return 0
    log "Running ${#pids[@]} lanes side by side; each one's output follows when it ends"
    wait "${pids[@]}"
    for lane in "${files[@]}"; do
        cat "$lane.log"
        replay_lane "$lane"
    done
}

# run_lane FILE FUNCTION...: the functions in a subshell, output to FILE.log; the steps they
# recorded and the test counts to FILE.steps, for replay_lane.
run_lane() {
    local file="$1" fn i
    shift
    (
        STEP_NAMES=() STEP_RESULTS=() STEP_SECONDS=() STEP_NOTES=()
        TOTAL_PASSED=0 TOTAL_FAILED=0 TOTAL_SKIPPED=0
        for fn in "$@"; do "$fn"; done
        {
            printf 'totals\t%s\t%s\t%s\n' "$TOTAL_PASSED" "$TOTAL_FAILED" "$TOTAL_SKIPPED"
            for ((i = 0; i < ${#STEP_NAMES[@]}; i++)); do
                printf 'step\t%s\t%s\t%s\t%s\n' "${STEP_NAMES[$i]}" "${STEP_RESULTS[$i]}" \
                    "${STEP_SECONDS[$i]}" "${STEP_NOTES[$i]}"
            done
        } >"$file.steps"
    ) >"$file.log" 2>&1 </dev/null
}

# replay_lane FILE: add what run_lane wrote to this run's steps and counts.
replay_lane() {
    local kind a b c d
    [ -f "$1.steps" ] || { record "lane $1" FAIL 0 "(it recorded nothing: see its output)"; return; }
    while IFS=$'\t' read -r kind a b c d; do
        if [ "$kind" = totals ]; then
            TOTAL_PASSED=$((TOTAL_PASSED + a))
            TOTAL_FAILED=$((TOTAL_FAILED + b))
            TOTAL_SKIPPED=$((TOTAL_SKIPPED + c))
        else
            STEP_NAMES+=("$a") STEP_RESULTS+=("$b") STEP_SECONDS+=("$c") STEP_NOTES+=("$d")
        fi
    done <"$1.steps"
}

summary() {
    local i failed=0 total=${#STEP_NAMES[@]} colour skipped=()
    echo
    log "Summary (${SECONDS}s in all)"
    for ((i = 0; i < total; i++)); do
        case "${STEP_RESULTS[$i]}" in
            PASS) colour="$C_GREEN" ;;
            FAIL) colour="$C_RED" failed=$((failed + 1)) ;;
            *) colour="$C_YELLOW" skipped+=("${STEP_NAMES[$i]}") ;;
        esac
        printf '  %s%-4s%s  %-42s %5ss  %s\n' "$colour" "${STEP_RESULTS[$i]}" "$C_OFF" \
            "${STEP_NAMES[$i]}" "${STEP_SECONDS[$i]}" "${STEP_NOTES[$i]}"
    done
    if [ "$failed" -eq 0 ] && [ ${#skipped[@]} -gt 0 ]; then
        printf '%stest.sh: %s steps passed, %s SKIPPED in %ss%s\n' "$C_YELLOW" \
            "$((total - ${#skipped[@]}))" "${#skipped[@]}" "$SECONDS" "$C_OFF"
    elif [ "$failed" -eq 0 ]; then
        printf '%stest.sh: all %s steps passed in %ss%s\n' "$C_GREEN" "$total" "$SECONDS" "$C_OFF"
    else
        printf '%stest.sh: %s of %s steps FAILED in %ss%s\n' "$C_RED" "$failed" "$total" \
            "$SECONDS" "$C_OFF"
    fi
    # Last, alone on its line: the totals over every pytest run.
    echo "total: $TOTAL_PASSED passed, $TOTAL_FAILED failed, $TOTAL_SKIPPED skipped"
    # A run that skipped suites is not a full run: the last line says which (CI fails instead).
    if [ ${#skipped[@]} -gt 0 ]; then
        local joined
        joined="$(printf '%s; ' "${skipped[@]}")"
        printf '%s%sNOT A FULL RUN: SKIPPED %s (a database server did not answer: see scripts/check_services.sh)%s\n' \
            "$C_BOLD" "$C_YELLOW" "${joined%; }" "$C_OFF"
    fi
    [ "$failed" -eq 0 ]
}

# ----------------------------------------------------------------------------- main

main() {
    local stack db scope wanted_dbs=() stacks=() runs=() conformance_runs=()
    if [ "$WAGTAIL_ONLY" = 1 ]; then
        wagtail_integration
        summary
        return
    fi
    for stack in "${STACKS[@]}"; do
        selected "$stack" "${ONLY_STACKS[@]}" && stacks+=("$stack")
    done
    scope=all
    [ "$CONFORMANCE_ONLY" = 1 ] && scope=conformance
    for stack in "${stacks[@]}"; do
        local stack_scope="$scope"
        # Only the newest line runs everything, unless asked (--all-lines, or this stack alone).
        if [ "$scope" = all ] && [ "$stack" != "$MAIN_STACK" ] && [ "$ALL_LINES" != 1 ] &&
            [ ${#ONLY_STACKS[@]} -eq 0 ]; then
            stack_scope=lines
        fi
        for db in ${STACK_DBS[$stack]}; do
            selected "$db" "${ONLY_DBS[@]}" || continue
            runs+=("$stack $db $stack_scope")
            contains "$db" "${wanted_dbs[@]}" || wanted_dbs+=("$db")
        done
        for db in ${STACK_CONFORMANCE_DBS[$stack]}; do
            selected "$db" "${ONLY_DBS[@]}" || continue
            conformance_runs+=("$stack $db conformance")
            contains "$db" "${wanted_dbs[@]}" || wanted_dbs+=("$db")
        done
    done
    # The short conformance runs last, to fill the gaps the long runs leave.
    runs+=("${conformance_runs[@]}")
    if [ "$QUICK" != 1 ] && [ "$CONFORMANCE_ONLY" != 1 ] && [ ${#ONLY_STACKS[@]} -eq 0 ]; then
        WAGTAIL_RUN=1
    fi
    # The main stack carries ruff and mkdocs, so it is always built.
    if contains "$MAIN_STACK" "${stacks[@]}"; then
        prebuild_venvs "${stacks[@]}"
    else
        prebuild_venvs "$MAIN_STACK" "${stacks[@]}"
        build_stack "$MAIN_STACK"
    fi
    for stack in "${stacks[@]}"; do
        build_stack "$stack"
    done
    if [ -n "${STACK_PY[$MAIN_STACK]:-}" ]; then
        lint
        harness_tests
        [ "$QUICK" = 1 ] || docs_build
        [ "$QUICK" = 1 ] || package_check
    fi
    for stack in "${stacks[@]}"; do
        [ -z "${STACK_PY[$stack]:-}" ] || migrations_check "$stack"
    done
    for db in "${wanted_dbs[@]}"; do
        [ "$db" = sqlite ] || check_database_server "$db"
    done
    if [ -f scripts/install_browser.sh ] && [ "$CONFORMANCE_ONLY" != 1 ]; then
        step "install browser" bash scripts/install_browser.sh
    fi
    # The PgBouncer tests start Debian's pgbouncer in front of PostgreSQL (in CI they fail
    # without it).
    if contains postgres "${wanted_dbs[@]}" && [ "$CONFORMANCE_ONLY" != 1 ]; then
        step "install pgbouncer" bash scripts/install_pgbouncer.sh
    fi
    # The clock tests run a supervisor under libfaketime (in CI they fail without it).
    if [ "$CONFORMANCE_ONLY" != 1 ]; then
        step "install faketime" bash scripts/install_faketime.sh
    fi
    run_all_pytest "${runs[@]}"
    local harnesses=() integration=()
    if [ "$WAGTAIL_RUN" = 1 ]; then
        integration=(wagtail_integration)
    fi
    if [ "$QUICK" != 1 ] && [ "$CONFORMANCE_ONLY" != 1 ] && [ -n "${STACK_PY[$MAIN_STACK]:-}" ]; then
        harnesses=(chaos_run misbehave_run cluster_run)
    fi
    # Each of these runs for a fixed time or waits on its processes, so two lanes of them
    # (PARALLEL of 2 or more) take about as long as the longer lane. The Wagtail test takes
    # about as long as the three harnesses together: 395 s against 389 s on 2026-12-04.
    run_lanes "${harnesses[*]}" "${integration[*]}"
    summary
}

# Sourced (tests/test_test_script.py), it only defines the functions.
[ "${BASH_SOURCE[0]}" != "$0" ] || main
