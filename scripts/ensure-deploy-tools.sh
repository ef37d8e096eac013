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

# shellcheck source=lib/apt-install.sh
. "$(dirname "$0")/lib/apt-install.sh"
apt_install ensure-deploy-tools "install systemd-analyze (systemd) and promtool (prometheus) yourself" "${missing[@]}"

for tool in systemd-analyze promtool; do
    if ! command -v "$tool" >/dev/null 2>&1; then
        echo "ensure-deploy-tools: installed ${missing[*]} but $tool is still not on PATH" >&2
        exit 1
    fi
done
echo "ensure-deploy-tools: systemd-analyze and promtool available"
