#!/usr/bin/env bash
# apt_install_once PACKAGE: install a Debian package the tests need, unless it is there.
# Sourced by the install_*.sh scripts; idempotent, and quiet when there is nothing to do.

apt_install_once() {
    local package="$1"
    if dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        echo "install: $package already installed"
        return 0
    fi
    local sudo=()
    [ "$(id -u)" -eq 0 ] || sudo=(sudo)
    echo "install: installing $package"
    export DEBIAN_FRONTEND=noninteractive
    if ! "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$package" </dev/null; then
        "${sudo[@]}" apt-get update -qq </dev/null
        "${sudo[@]}" apt-get install -y -qq --no-install-recommends "$package" </dev/null
    fi
}
