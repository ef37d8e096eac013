#!/usr/bin/env bash
# Makes `cargo deny` available for scripts/test.sh. Idempotent: does nothing when
# `cargo-deny` is already installed (it is cached in ~/.cargo/bin); otherwise builds it from
# crates.io with `cargo install --locked` (about 11 minutes on two cores, once).
#
# Advisories: `cargo deny check advisories` clones the RustSec advisory database from GitHub.
# Where the network cannot reach it, that check cannot run, so scripts/test.sh runs only
# `bans licenses sources` unless HOOKGATE_DENY_ADVISORIES=1 (set it where the database is
# reachable, e.g. in CI with network access).
set -euo pipefail

# The version deny.toml is written for (its `crate = "name:<req"` ban syntax).
version="0.20.2"

if command -v cargo-deny >/dev/null 2>&1; then
    echo "ensure-cargo-deny: $(cargo deny --version) already available"
    exit 0
fi

echo "ensure-cargo-deny: cargo-deny not found; installing $version from crates.io (takes minutes)"
cargo install cargo-deny --version "$version" --locked
echo "ensure-cargo-deny: installed $(cargo deny --version)"
