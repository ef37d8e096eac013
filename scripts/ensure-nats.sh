#!/usr/bin/env bash
# Makes `nats-server` (with JetStream) available for the delivery tests
# (crates/hookgate/tests/it/delivery.rs), which start and stop their own servers on free
# loopback ports. Idempotent: does nothing when nats-server is already on PATH or in
# /usr/sbin; otherwise installs Debian's `nats-server` package. It does not start a server.
set -euo pipefail

find_nats() {
    if command -v nats-server >/dev/null 2>&1; then
        command -v nats-server
        return 0
    fi
    for p in /usr/sbin/nats-server /usr/bin/nats-server; do
        if [ -x "$p" ]; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

if bin=$(find_nats); then
    echo "ensure-nats: nats-server already available at $bin ($("$bin" --version))"
    exit 0
fi

# shellcheck source=lib/apt-install.sh
. "$(dirname "$0")/lib/apt-install.sh"
apt_install ensure-nats "install nats-server (2.9 or newer) so that it is on PATH" nats-server
# The package may enable a system service; the tests run their own servers.
if command -v systemctl >/dev/null 2>&1; then
    $sudo systemctl disable --now nats-server >/dev/null 2>&1 || true
fi

if bin=$(find_nats); then
    echo "ensure-nats: installed; $bin ($("$bin" --version))"
else
    echo "ensure-nats: nats-server installed but not found" >&2
    exit 1
fi
