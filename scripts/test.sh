#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it. Installs or starts what the tests need first.
#
#   PostgreSQL: tests use DATABASE_URL when set, otherwise they start a throwaway cluster with
#   initdb/pg_ctl (scripts/ensure-postgres.sh installs the distribution's package if missing).
#   NATS: the delivery tests start their own nats-server -js (scripts/ensure-nats.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/ensure-postgres.sh
scripts/ensure-nats.sh

echo "== cargo fmt --check"
cargo fmt --all -- --check
echo "== cargo clippy"
cargo clippy --workspace --all-targets --features hookgate/failpoints -- -D warnings
echo "== cargo test (with failpoints: the crash tests kill the real binary at named points)"
cargo test --workspace --features hookgate/failpoints
echo "== fuzz smoke run (each target of crates/hookgate-providers/fuzz for 20 s)"
scripts/fuzz-smoke.sh
echo "== the repository stands alone (a copy with nothing beside it runs the vector tests)"
scripts/standalone-check.sh
