#!/usr/bin/env bash
# Makes Playwright's driver library (`playwright-core`, pinned in tests/browser/package.json and
# package-lock.json) available for the console's browser test. Installs it with `npm ci` into
# tests/browser/node_modules — project-local, never global — and never downloads a browser: the
# test launches the distribution's Chromium (scripts/ensure-chromium.sh) by its path.
# Idempotent: does nothing when the pinned version is already installed. Needs Node.js >= 20
# and npm (Debian's `nodejs` and `npm` packages are installed when missing).
set -euo pipefail
cd "$(dirname "$0")/../tests/browser"

sudo=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
fi

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "ensure-playwright: node/npm not found and apt-get is not available; install Node.js >= 20 and npm" >&2
        exit 1
    fi
    echo "ensure-playwright: node/npm not found; installing Debian's nodejs and npm packages"
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -q
    $sudo apt-get install -y -q --no-install-recommends nodejs npm
fi

major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
    echo "ensure-playwright: Node.js $(node --version) is too old; playwright-core needs >= 20" >&2
    exit 1
fi

want=$(node -p 'require("./package.json").dependencies["playwright-core"]')
have=$(node -p 'try { require("./node_modules/playwright-core/package.json").version } catch (e) { "" }')
if [ "$have" = "$want" ]; then
    echo "ensure-playwright: playwright-core $have already installed in tests/browser/node_modules (node $(node --version))"
    exit 0
fi

echo "ensure-playwright: installing playwright-core $want into tests/browser/node_modules"
# playwright-core has no install script; skipping scripts (and the browser download) keeps it so.
PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --ignore-scripts
have=$(node -p 'require("./node_modules/playwright-core/package.json").version')
echo "ensure-playwright: installed playwright-core $have (node $(node --version))"
