#!/usr/bin/env bash
# Makes the deployment kit's checkers available, for the tests of deploy/
# (crates/hookgate/tests/it/deploy.rs):
#   systemd-analyze  (Debian's `systemd` package)     verifies deploy/*.service
#   promtool         (Debian's `prometheus` package)  checks and unit-tests deploy/prometheus/
# Idempotent: installs a package only when its tool is missing from PATH. It starts nothing
# (the prometheus package's own service is not needed; the tests run promtool only).
set -euo pipefail

missing=()
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)

if [ "${#missing[@]}" -eq 0 ]; then
    echo "ensure-deploy-tools: systemd-analyze ($(systemd-analyze --version | head -n1)) and promtool ($(promtool --version 2>&1 | head -n1)) already available"
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-deploy-tools: missing package(s) ${missing[*]} and apt-get is not available;" >&2
    echo "  install systemd-analyze (systemd) and promtool (prometheus) yourself" >&2
    exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo="sudo"
    else
        echo "ensure-deploy-tools: need root (or sudo) to install ${missing[*]}" >&2
        exit 1
    fi
fi

echo "ensure-deploy-tools: installing Debian's ${missing[*]} package(s)"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"

for tool in systemd-analyze promtool; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "ensure-deploy-tools: installed ${missing[*]} but $tool is still not on PATH" >&2
        exit 1
    fi
done
echo "ensure-deploy-tools: systemd-analyze and promtool available"
