#!/usr/bin/env bash
# The crash proof (RELIABILITY.md): runs crates/hookgate-chaos against the real hookgate binary
# on SQLite and on PostgreSQL. Provider-style traffic while the gateway is killed with kill -9
# and restarted, PostgreSQL is stopped (pg_ctl stop -m immediate) and started, nats-server is
# stopped and started; then a final recovery and drain, and the checks. One JSON summary per
# backend; exit status 1 if any backend found a violation, 2 if a run could not complete.
#
# Usage: scripts/chaos.sh [--ci] [--cycles N] [--backend sqlite|postgres|both] [--release]
#                         [--out DIR] [-- extra hookgate-chaos flags]
#   --ci        the short run CI does (scripts/test.sh): 25 cycles per backend (≤ 3 min each)
#   --cycles N  kill -9 cycles per backend (default 100: the documented long run)
#   --release   test the release binary (default: the debug binary the test suite builds)
#   --out DIR   where the summaries go (default chaos-results/)
# PostgreSQL: always a throwaway cluster of the runner's own (initdb/pg_ctl from PATH or
# /usr/lib/postgresql/*/bin; scripts/ensure-postgres.sh installs them), since the run stops it;
# DATABASE_URL is not used. NATS: nats-server -js on a free loopback port (scripts/ensure-nats.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

CYCLES=100
BACKENDS=(sqlite postgres)
PROFILE=debug
OUT=chaos-results
EXTRA=()
while [ "$#" -gt 0 ]; do
    case "$1" in
        --ci) CYCLES=25; EXTRA+=(--db-outage-every 5 --nats-outage-every 4 --startup-kill-every 3 --max-seconds 120) ;;
        --cycles) CYCLES=$2; shift ;;
        --backend) case "$2" in both) BACKENDS=(sqlite postgres) ;; *) BACKENDS=("$2") ;; esac; shift ;;
        --release) PROFILE=release ;;
        --out) OUT=$2; shift ;;
        --) shift; EXTRA+=("$@"); break ;;
        *) echo "chaos.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

log() { echo "chaos.sh: $*" >&2; }

BUILD=(cargo build -p hookgate -p hookgate-chaos)
[ "$PROFILE" = release ] && BUILD+=(--release)
log "building (${BUILD[*]})"
"${BUILD[@]}" >&2
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}/$PROFILE"
BIN="$TARGET/hookgate"
CHAOS="$TARGET/hookgate-chaos"

NATS=""
for p in "$(command -v nats-server || true)" /usr/sbin/nats-server /usr/bin/nats-server; do
    if [ -n "$p" ] && [ -x "$p" ]; then NATS=$p; break; fi
done
[ -n "$NATS" ] || { log "nats-server not found: run scripts/ensure-nats.sh"; exit 2; }

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d /tmp/hookgate-chaos.XXXXXX)
chmod 755 "$TMP"
PG_CTL=""
PG_DATA=""
AS_PG=()
cleanup() {
    if [ -n "$PG_DATA" ]; then "${AS_PG[@]}" "$PG_CTL" -D "$PG_DATA" stop -m immediate >/dev/null 2>&1 || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

start_postgres() { # sets PG_URL
    local bin=""
    if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
        bin=$(dirname "$(command -v pg_ctl)")
    else
        bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r | head -1 || true)
    fi
    [ -n "$bin" ] && [ -x "$bin/initdb" ] || { log "no initdb/pg_ctl: run scripts/ensure-postgres.sh"; exit 2; }
    PG_CTL="$bin/pg_ctl"
    PG_USER_ARGS=()
    if [ "$(id -u)" = 0 ]; then
        AS_PG=(runuser -u postgres --)
        PG_USER_ARGS=(--pg-user postgres)
    fi
    mkdir -p "$TMP/pg"
    [ "$(id -u)" = 0 ] && chown postgres:postgres "$TMP/pg"
    PG_DATA="$TMP/pg/data"
    local port
    port=$(free_port)
    "${AS_PG[@]}" "$bin/initdb" -D "$PG_DATA" -A trust -U postgres -E UTF8 --no-locale >/dev/null
    cat >> "$PG_DATA/postgresql.conf" <<EOF
# hookgate chaos: defaults otherwise (fsync = on, synchronous_commit = on)
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$TMP/pg'
max_connections = 100
max_wal_size = '256MB'
EOF
    "${AS_PG[@]}" "$PG_CTL" -D "$PG_DATA" -l "$TMP/pg/server.log" -w start >/dev/null
    PG_URL="postgres://postgres@127.0.0.1:$port/postgres"
    log "PostgreSQL: throwaway cluster on port $port ($("$PG_CTL" --version))"
}

STATUS=0
for backend in "${BACKENDS[@]}"; do
    work="$TMP/$backend"
    mkdir -p "$work"
    args=(--binary "$BIN" --backend "$backend" --work-dir "$work" --cycles "$CYCLES"
          --nats-server "$NATS" --json "$OUT/$backend.json")
    case "$backend" in
        sqlite) ;; # no database to stop: the kill -9 cycles and NATS outages only
        postgres)
            start_postgres
            args+=(--store-url "$PG_URL" --pg-ctl "$PG_CTL" --pg-data "$PG_DATA"
                   --pg-log "$TMP/pg/server.log" "${PG_USER_ARGS[@]}") ;;
        *) log "unknown backend $backend"; exit 2 ;;
    esac
    log "$backend: $CYCLES kill -9 cycles"
    start=$(date +%s)
    code=0
    "$CHAOS" "${args[@]}" "${EXTRA[@]}" > "$OUT/$backend.out" || code=$?
    log "$backend: finished in $(( $(date +%s) - start )) s, exit $code"
    python3 - "$OUT/$backend.out" <<'PY' >&2 2>/dev/null || cat "$OUT/$backend.out" >&2
import json, sys
s = json.load(open(sys.argv[1]))
keys = ["backend", "ok", "cycles", "kills_during_startup", "kills_while_serving",
        "database_outages_survived", "nats_outages_survived", "events_sent", "acknowledged",
        "lost", "duplicate_rows", "duplicate_outbox_rows", "deliveries",
        "duplicate_deliveries_on_wire", "nats_deliveries", "nats_duplicates_in_stream",
        "violations", "chaos_seconds", "drain_seconds", "backlog_when_senders_finished",
        "total_seconds"]
print("  " + json.dumps({k: s[k] for k in keys}))
if s["verification"]["problems"]:
    print("  problems: " + json.dumps(s["verification"]["problems"]))
PY
    if [ "$code" != 0 ]; then
        log "$backend: FAILED; last gateway log lines:"
        tail -n 30 "$work/gateway.log" >&2 || true
        [ "$code" -gt "$STATUS" ] && STATUS=$code
    fi
    if [ "$backend" = postgres ]; then
        "${AS_PG[@]}" "$PG_CTL" -D "$PG_DATA" stop -m fast >/dev/null 2>&1 || true
        PG_DATA=""
    fi
done
log "summaries in $OUT"
exit "$STATUS"
