#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium and its WebDriver for the admin browser test.
# Idempotent: when both are already installed it returns at once without touching apt.
set -euo pipefail

packages=(chromium chromium-driver)

missing=()
for package in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done

if [ "${#missing[@]}" -eq 0 ]; then
    echo "install_browser: chromium and chromium-driver already installed"
    exit 0
fi

if [ "$(id -u)" -eq 0 ]; then
    sudo=()
else
    sudo=(sudo)
fi

echo "install_browser: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
/usr/bin/chromium --version
