#!/usr/bin/env bash
# Check that the database servers the tests use answer; start any that does not, and on
# Debian, as root (or with sudo), install a missing one and give it the tests' user:
# PostgreSQL's `postgres` and MariaDB's `root`, without a password from 127.0.0.1.
# A server that is already installed is only started, never reconfigured.
#
#   scripts/check_services.sh              # PostgreSQL and MariaDB
#   scripts/check_services.sh postgres     # only one of them
#
# Exits non-zero, naming it, if a server still does not answer after being started.
set -uo pipefail

WAIT_SECONDS="${SQLQUEUE_SERVICE_WAIT:-30}"

postgres_answers() { pg_isready -q -h 127.0.0.1 -t 2 >/dev/null 2>&1; }
mysql_answers() { mysqladmin -uroot -h127.0.0.1 --connect-timeout=2 ping >/dev/null 2>&1; }

# apt_install PACKAGE...: unattended, as root or through sudo; false where that cannot be.
apt_install() {
    command -v apt-get >/dev/null 2>&1 || return 1
    local apt=(apt-get install -y -q --no-install-recommends "$@")
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || return 1
        apt=(sudo "${apt[@]}")
    fi
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" </dev/null
}

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

postgres_version() {
    find /etc/postgresql -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -V | tail -n1
}

# A PostgreSQL installed here for the tests: `postgres` may connect from this machine without
# a password, as the test settings expect.
install_postgres() {
    echo "PostgreSQL is not installed; installing it with apt-get."
    apt_install postgresql || return 1
    local version hba
    version="$(postgres_version)"
    hba="/etc/postgresql/$version/main/pg_hba.conf"
    as_root sed -i '1i local all all trust\nhost all all 127.0.0.1/32 trust' "$hba" &&
        as_root pg_ctlcluster --skip-systemctl-redirect "$version" main restart
}

start_postgres() {
    local version
    version="$(postgres_version)"
    if [ -z "$version" ]; then
        install_postgres || { echo "PostgreSQL is not installed (no /etc/postgresql)." >&2; return 1; }
        version="$(postgres_version)"
    fi
    as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start
}

# A MariaDB installed here for the tests: `root` from 127.0.0.1 without a password (Debian's
# root@localhost logs in through the Unix socket only).
install_mysql() {
    echo "MariaDB is not installed; installing it with apt-get."
    apt_install mariadb-server mariadb-client || return 1
    as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
    local waited=0
    until as_root mariadb-admin ping >/dev/null 2>&1; do
        [ "$waited" -lt "$WAIT_SECONDS" ] || return 1
        sleep 1
        waited=$((waited + 1))
    done
    as_root mariadb -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; \
        GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
}

start_mysql() {
    if [ ! -x /usr/sbin/mariadbd ]; then
        install_mysql || { echo "MariaDB is not installed (no /usr/sbin/mariadbd)." >&2; return 1; }
    fi
    as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
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
