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

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-chromium: $bin not found and apt-get is not available;" >&2
    echo "  install the distribution's chromium package so that $bin exists" >&2
    exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        sudo="sudo"
    else
        echo "ensure-chromium: need root (or sudo) to install chromium" >&2
        exit 1
    fi
fi

echo "ensure-chromium: $bin not found; installing Debian's chromium package"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core

if [ -x "$bin" ]; then
    echo "ensure-chromium: installed; $bin ($("$bin" --version 2>/dev/null || echo 'version unknown'))"
else
    echo "ensure-chromium: chromium installed but $bin still not found" >&2
    exit 1
fi
