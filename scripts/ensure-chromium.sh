#!/usr/bin/env bash
# Makes headless Chromium available for the console's browser test
# (crates/hookgate/tests/it/console.rs drives it with Playwright, tests/browser/). Idempotent:
# does nothing when /usr/bin/chromium exists; otherwise installs Debian's `chromium` package.
# The browser is always the distribution's: Playwright never downloads one.
set -euo pipefail

bin=/usr/bin/chromium
if [ -x "$bin" ]; then
    echo "ensure-chromium: $bin already available ($("$bin" --version 2>/dev/null || echo 'version unknown'))"
    exit 0
fi

# shellcheck source=lib/apt-install.sh
. "$(dirname "$0")/lib/apt-install.sh"
apt_install ensure-chromium "install the distribution's chromium package so that $bin exists" chromium fonts-dejavu-core

if [ -x "$bin" ]; then
    echo "ensure-chromium: installed; $bin ($("$bin" --version 2>/dev/null || echo 'version unknown'))"
else
    echo "ensure-chromium: chromium installed but $bin still not found" >&2
    exit 1
fi
