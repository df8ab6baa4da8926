#!/usr/bin/env bash
# Check that the database servers the tests use answer; start any that does not.
#
#   scripts/check_services.sh              # PostgreSQL and MariaDB
#   scripts/check_services.sh postgres     # only one of them
#
# Exits non-zero, naming it, if a server still does not answer after being started.
set -uo pipefail

WAIT_SECONDS="${SQLQUEUE_SERVICE_WAIT:-30}"

postgres_answers() { pg_isready -q -h 127.0.0.1 -t 2 >/dev/null 2>&1; }
mysql_answers() { mysqladmin -uroot -h127.0.0.1 --connect-timeout=2 ping >/dev/null 2>&1; }

start_postgres() {
    local version
    version="$(find /etc/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -V | tail -n1)"
    if [ -z "$version" ]; then
        echo "PostgreSQL is not installed (no /etc/postgresql)." >&2
        return 1
    fi
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
}

start_mysql() {
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
}

# ensure NAME: check, start if needed, wait for it to answer.
ensure() {
    local name="$1" label
    case "$name" in
        postgres) label="PostgreSQL" ;;
        mysql | mariadb) name=mysql label="MariaDB" ;;
        *)
            echo "unknown service: $name (expected postgres or mysql)" >&2
            return 2
            ;;
    esac
    if "${name}_answers"; then
        echo "$label answers."
        return 0
    fi
    echo "$label does not answer; starting it."
    "start_${name}" </dev/null || echo "Starting $label failed." >&2
    local waited=0
    while [ "$waited" -lt "$WAIT_SECONDS" ]; do
        if "${name}_answers"; then
            echo "$label answers (after ${waited}s)."
            return 0
        fi
        sleep 1
        waited=$((waited + 1))
    done
    echo "ERROR: $label does not answer after ${WAIT_SECONDS}s." >&2
    return 1
}

main() {
    local services=("$@") failed=0 service
    [ ${#services[@]} -gt 0 ] || services=(postgres mysql)
    for service in "${services[@]}"; do
        ensure "$service" || failed=1
    done
    return "$failed"
}

main "$@"
