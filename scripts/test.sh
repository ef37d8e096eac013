#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it. Installs or starts what the tests need first.
#
#   PostgreSQL: tests use DATABASE_URL when set, otherwise they start a throwaway cluster with
#   initdb/pg_ctl (scripts/ensure-postgres.sh installs the distribution's package if missing).
#   NATS: the delivery tests start their own nats-server -js (scripts/ensure-nats.sh installs it).
#   RabbitMQ and Redis: the broker destination tests use the servers on 127.0.0.1:5672 and
#   :6379 (scripts/ensure-rabbitmq.sh and ensure-redis.sh install and start them; or set
#   HOOKGATE_TEST_AMQP_URL / HOOKGATE_TEST_REDIS_URL); the RabbitMQ restart test runs a
#   private node of its own.
#   The console's browser test (crates/hookgate/tests/it/console.rs): the distribution's
#   Chromium (scripts/ensure-chromium.sh) driven by playwright-core, pinned in tests/browser/
#   and installed there with npm ci (scripts/ensure-playwright.sh; no browser download).
#   cargo-deny: deny.toml's bans, licenses and sources (scripts/ensure-cargo-deny.sh installs
#   it); advisories too with HOOKGATE_DENY_ADVISORIES=1 (they need the RustSec database from
#   the network).
set -euo pipefail
cd "$(dirname "$0")/.."

# Line tables are enough for a failing test's backtrace; full debug info triples the target
# dir (the fuzz build and the standalone copy need disk after it). Set either to override.
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-line-tables-only}"
export CARGO_PROFILE_TEST_DEBUG="${CARGO_PROFILE_TEST_DEBUG:-line-tables-only}"

scripts/ensure-postgres.sh
scripts/ensure-nats.sh
scripts/ensure-rabbitmq.sh
scripts/ensure-redis.sh
scripts/ensure-chromium.sh
scripts/ensure-playwright.sh
scripts/ensure-cargo-deny.sh
scripts/ensure-deploy-tools.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --features hookgate/failpoints -- -D warnings
# Without failpoints too: code and tests behind the feature must not leave the default build warning.
cargo clippy --workspace --all-targets -- -D warnings
# The fuzz targets' API (feature `fuzzing`) is built only by the fuzz smoke run: check it early.
cargo clippy -p hookgate-providers --features fuzzing -- -D warnings
echo "== cargo deny (deny.toml)"
cargo deny check bans licenses sources
if [ "${HOOKGATE_DENY_ADVISORIES:-0}" = "1" ]; then
    cargo deny check advisories
else
    echo "cargo deny check advisories skipped (needs the network; HOOKGATE_DENY_ADVISORIES=1 runs it)"
fi
echo "== cargo test (with failpoints: the crash tests kill the real binary at named points)"
cargo test --workspace --features hookgate/failpoints
echo "== the crash proof, short run (kill -9, database and NATS outages under traffic; RELIABILITY.md)"
scripts/chaos.sh --ci --out target/chaos-results
echo "== fuzz smoke run (each target of crates/hookgate-providers/fuzz for 20 s)"
scripts/fuzz-smoke.sh
echo "== the repository stands alone (a copy with nothing beside it runs the vector tests)"
scripts/standalone-check.sh
