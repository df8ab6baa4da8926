# shellcheck shell=bash
# Shared helpers for scripts/test.sh and scripts/demo.sh: find interpreters, build venvs.
# Sourced, not run. A venv is rebuilt only when what it was built from changes
# (pyproject.toml, the interpreter, the requested packages), so repeated runs start at once.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# Bump when the way venvs are built changes, so old venvs are rebuilt.
VENV_RECIPE_VERSION=1

# Colours only on a terminal; CI logs stay plain text.
# shellcheck disable=SC2034  # used by the scripts that source this file
if [ -t 1 ]; then
    C_BOLD=$'\033[1m' C_RED=$'\033[31m' C_GREEN=$'\033[32m' C_YELLOW=$'\033[33m' C_OFF=$'\033[0m'
else
    C_BOLD='' C_RED='' C_GREEN='' C_YELLOW='' C_OFF=''
fi

log() { printf '%s==> %s%s\n' "$C_BOLD" "$*" "$C_OFF" >&2; }
warn() { printf '%swarning: %s%s\n' "$C_YELLOW" "$*" "$C_OFF" >&2; }

# Print the path of a Python 3.12 interpreter, or nothing.
find_python312() {
    local root candidate
    if command -v pyenv >/dev/null 2>&1 && root="$(pyenv root 2>/dev/null)"; then
        for candidate in "$root"/versions/3.12*/bin/python; do
            [ -x "$candidate" ] && { echo "$candidate"; return 0; }
        done
    fi
    for candidate in /root/.pyenv/versions/3.12*/bin/python; do
        [ -x "$candidate" ] && { echo "$candidate"; return 0; }
    done
    command -v python3.12 2>/dev/null || true
}

# Print the path of a Python 3.11 interpreter, or nothing.
find_python311() {
    local root candidate
    if command -v python3 >/dev/null 2>&1 \
        && python3 -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' 2>/dev/null; then
        command -v python3
        return 0
    fi
    if command -v pyenv >/dev/null 2>&1 && root="$(pyenv root 2>/dev/null)"; then
        for candidate in "$root"/versions/3.11*/bin/python; do
            [ -x "$candidate" ] && { echo "$candidate"; return 0; }
        done
    fi
    command -v python3.11 2>/dev/null || true
}

# install_python 312|311: try to install that Python where it can be done unattended (pyenv,
# else Debian's package); true if an install command succeeded.
install_python() {
    local version="${1:0:1}.${1:1}"
    if command -v pyenv >/dev/null 2>&1; then
        log "No Python $version found; installing it with pyenv (a few minutes)"
        pyenv install -s "$version" </dev/null >&2 && return 0
    fi
    if command -v apt-get >/dev/null 2>&1 && apt-cache show "python$version-venv" >/dev/null 2>&1; then
        log "No Python $version found; installing python$version-venv with apt-get"
        local apt=(apt-get install -y -q --no-install-recommends "python$version-venv")
        [ "$(id -u)" -eq 0 ] || apt=(sudo "${apt[@]}")
        DEBIAN_FRONTEND=noninteractive "${apt[@]}" </dev/null >&2 && return 0
    fi
    warn "Python $version is missing: install it with pyenv or your package manager (python$version on PATH)"
    return 1
}

# mysqlclient compiles against the MariaDB client library; Debian ships it as libmariadb-dev.
ensure_mysql_build_deps() {
    if command -v mysql_config >/dev/null 2>&1 || command -v mariadb_config >/dev/null 2>&1; then
        return 0
    fi
    log "Installing libmariadb-dev and pkg-config (needed to build mysqlclient)"
    local apt=(apt-get install -y -q --no-install-recommends libmariadb-dev pkg-config)
    [ "$(id -u)" -eq 0 ] || apt=(sudo "${apt[@]}")
    if ! DEBIAN_FRONTEND=noninteractive "${apt[@]}" </dev/null; then
        log "apt-get install failed; running apt-get update and trying again"
        local update=(apt-get update -q)
        [ "$(id -u)" -eq 0 ] || update=(sudo "${update[@]}")
        "${update[@]}" </dev/null && DEBIAN_FRONTEND=noninteractive "${apt[@]}" </dev/null
    fi
}

# ensure_venv NAME PYTHON PIP_ARG...
# Make $REPO_ROOT/.venv-NAME with PYTHON and `pip install PIP_ARG...` (run from the repo root),
# unless the venv already holds exactly that. Prints the venv's python on stdout.
ensure_venv() {
    local name="$1" python="$2"
    shift 2
    local venv="$REPO_ROOT/.venv-$name"
    local stamp="$venv/.sqlqueue-stamp"
    local wanted
    wanted="$(
        {
            echo "recipe $VENV_RECIPE_VERSION"
            "$python" -c 'import sys; print(sys.version)'
            printf '%s\n' "$@"
            cat "$REPO_ROOT/pyproject.toml"
        } | sha256sum | cut -d' ' -f1
    )"
    mkdir -p "$REPO_ROOT/.venv-locks"
    (
        # Two runs sharing the repo (two terminals, two engineers) must not build one venv
        # at the same time.
        flock 9
        if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ] && [ -x "$venv/bin/python" ]; then
            exit 0
        fi
        log "Building .venv-$name ($("$python" -V 2>&1); pip install $*)"
        rm -rf "$venv"
        cd "$REPO_ROOT" &&
            "$python" -m venv "$venv" &&
            "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@" </dev/null &&
            echo "$wanted" >"$stamp"
    ) 9>"$REPO_ROOT/.venv-locks/$name.lock" >&2 || return 1
    echo "$venv/bin/python"
}
