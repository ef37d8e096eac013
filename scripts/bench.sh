#!/usr/bin/env bash
# Benchmarks hookgate end to end and writes bench-results/ (JSON per run + summary.md).
#
# For each scenario — SQLite (group commit on), SQLite with `group_commit = false`, PostgreSQL
# (group commit on and off) — and each run, it starts `hookgate serve` with a generated config
# and a fresh database, runs `hookgate bench` closed-loop (max throughput) and open-loop at a
# fixed rate, stops the gateway, and finally prints (scripts/bench-summary.py) a markdown table
# of medians, the spread over the runs, the group commit on/off ratios and every result as a
# share of the HTTP ceiling (`bench --ceiling`) measured in the same run. Scenarios are
# interleaved run by run, so the ratios compare measurements taken side by side.
#
# Retention scenarios (not in the default set): `sqlite-retention` seeds the store with
# BENCH_RETENTION_ROWS finished rows received 400 days ago (`hookgate bench-seed`, a bulk path
# through the store's own group commit, not HTTP) and runs the gateway with `[retention]
# interval_seconds = 1`, so the retention stage purges that backlog in its batches while the
# load runs; `sqlite-retention-idle` seeds the same rows but keeps everything for 100 years
# (nothing expires: same database size, no purging) — the pair measures what purging costs
# acceptance. `postgres-retention` / `postgres-retention-idle` likewise. After each run the
# gateway's `hookgate_retention_purged_total` counters are saved beside its JSON.
#
# Usage: scripts/bench.sh [scenario ...]     scenarios: sqlite sqlite-nogc postgres postgres-nogc ceiling
#                                            sqlite-retention sqlite-retention-idle
#                                            postgres-retention postgres-retention-idle
# Environment (defaults in brackets):
#   BENCH_RUNS [3]   BENCH_DURATION seconds [10]   BENCH_RATE open-loop rate [2000]
#   BENCH_CONNECTIONS closed-loop connections [64]  BENCH_DUPLICATES share [0.1]
#   BENCH_BODY_SIZE [mixed]   BENCH_OUT [bench-results]
#   BENCH_OVERLOAD_CONNECTIONS [2000]  BENCH_OVERLOAD_FACTOR [2]: the overload mode (SQLite and
#                     PostgreSQL with group commit) offers FACTOR x the median closed-loop rate
#                     measured so far in this run, open loop, over that many connections
#   BENCH_WORKER_CONCURRENCY  if set, `[worker] concurrency = N` in the gateway config (0 =
#                     acceptance only, no processing workers); unset = the gateway's default
#   BENCH_RETENTION_ROWS [1000000]  expired rows seeded for the retention scenarios
#   DATABASE_URL  use this PostgreSQL (a fresh schema per run) instead of a throwaway cluster
#   CARGO_TARGET_DIR  where cargo builds (the binary is taken from there)
#   BENCH_BIN     benchmark this hookgate binary instead of building one (e.g. an older
#                 release, to compare two builds side by side: alternate runs of each)
# Needs: cargo, curl, python3 (for the summary); for PostgreSQL: initdb/pg_ctl (PATH or
# /usr/lib/postgresql/*/bin, see scripts/ensure-postgres.sh) or DATABASE_URL, and psql.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
RUNS=${BENCH_RUNS:-3}
DURATION=${BENCH_DURATION:-10}
RATE=${BENCH_RATE:-2000}
CONNECTIONS=${BENCH_CONNECTIONS:-64}
DUPLICATES=${BENCH_DUPLICATES:-0.1}
BODY_SIZE=${BENCH_BODY_SIZE:-mixed}
OUT=${BENCH_OUT:-bench-results}
OVERLOAD_CONNECTIONS=${BENCH_OVERLOAD_CONNECTIONS:-2000}
OVERLOAD_FACTOR=${BENCH_OVERLOAD_FACTOR:-2}
RETENTION_ROWS=${BENCH_RETENTION_ROWS:-1000000}
if [ "$#" -gt 0 ]; then SCENARIOS=("$@"); else SCENARIOS=(sqlite sqlite-nogc postgres postgres-nogc ceiling); fi

log() { echo "bench.sh: $*" >&2; }

# ---------------------------------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------------------------------
if [ -n "${BENCH_BIN:-}" ]; then
    BIN=$BENCH_BIN
else
    log "building release (cargo build --release -p hookgate)"
    cargo build --release -p hookgate >&2
    BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/hookgate"
fi
[ -x "$BIN" ] || { log "no binary at $BIN"; exit 1; }

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT"/*.json "$OUT"/summary.md "$OUT"/machine.txt
TMP=$(mktemp -d /tmp/hookgate-bench.XXXXXX)
chmod 755 "$TMP"
GATEWAY_PID=""
PG_CTL=""
PG_DATA=""
AS_PG=()

cleanup() {
    if [ -n "$GATEWAY_PID" ]; then kill -9 "$GATEWAY_PID" 2>/dev/null || true; fi
    if [ -n "$PG_DATA" ]; then "${AS_PG[@]}" "$PG_CTL" -D "$PG_DATA" stop -m immediate >/dev/null 2>&1 || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# ---------------------------------------------------------------------------------------------
# Machine
# ---------------------------------------------------------------------------------------------
CPUS=$(nproc)
{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $CPUS cores ($(lscpu 2>/dev/null | sed -n 's/^Hypervisor vendor: *//p' | head -1) guest)"
    echo "memory: $(free -m | awk '/^Mem:/ {print $2 " MiB"}')"
    echo "kernel: $(uname -sr)"
    echo "disk (temp dir): $(df -h "$TMP" | awk 'NR==2 {print $1 ", " $2}')"
    echo "rustc: $(rustc --version)"
    echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo "settings: runs=$RUNS duration=${DURATION}s open-loop rate=${RATE}/s closed-loop connections=$CONNECTIONS duplicates=$DUPLICATES body=$BODY_SIZE worker_concurrency=${BENCH_WORKER_CONCURRENCY:-default}"
} > "$OUT/machine.txt"
cat "$OUT/machine.txt" >&2
NOTE="NOTE: this machine has $CPUS cores, shared by the load generator, the gateway and the database (and anything else running: load average at start $(cut -d' ' -f1 /proc/loadavg)). Figures are for that setup, not for a dedicated gateway host."
log "$NOTE"

# ---------------------------------------------------------------------------------------------
# PostgreSQL: DATABASE_URL, or a throwaway cluster in the temp dir (fsync on, defaults)
# ---------------------------------------------------------------------------------------------
PG_BASE_URL=""
needs_pg=0
for s in "${SCENARIOS[@]}"; do case "$s" in postgres*) needs_pg=1 ;; esac; done
if [ "$needs_pg" = 1 ]; then
    if [ -n "${DATABASE_URL:-}" ]; then
        PG_BASE_URL="$DATABASE_URL"
        log "PostgreSQL: DATABASE_URL (a fresh schema per run)"
    else
        PG_BIN=""
        if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
            PG_BIN=$(dirname "$(command -v pg_ctl)")
        else
            PG_BIN=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r | head -1 || true)
        fi
        [ -n "$PG_BIN" ] && [ -x "$PG_BIN/initdb" ] || { log "no initdb/pg_ctl: run scripts/ensure-postgres.sh or set DATABASE_URL"; exit 1; }
        PG_CTL="$PG_BIN/pg_ctl"
        if [ "$(id -u)" = 0 ]; then
            AS_PG=(runuser -u postgres --)
            chown postgres:postgres "$TMP"
        fi
        PG_DATA="$TMP/pg"
        PG_PORT=$(free_port)
        "${AS_PG[@]}" "$PG_BIN/initdb" -D "$PG_DATA" -A trust -U postgres -E UTF8 --no-locale >/dev/null
        cat >> "$PG_DATA/postgresql.conf" <<EOF
# hookgate bench: defaults otherwise (fsync = on, synchronous_commit = on)
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$TMP'
max_connections = 100
EOF
        "${AS_PG[@]}" "$PG_CTL" -D "$PG_DATA" -l "$TMP/pg.log" -w start >/dev/null
        PG_BASE_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres"
        log "PostgreSQL: throwaway cluster $("$PG_CTL" --version | awk '{print $3}') on port $PG_PORT (fsync on)"
        echo "postgresql: throwaway cluster, $("$PG_CTL" --version), default settings (fsync on, synchronous_commit on, shared_buffers 128MB)" >> "$OUT/machine.txt"
    fi
fi

pg_drop_schema() {
    command -v psql >/dev/null 2>&1 || return 0
    psql -q "${PG_BASE_URL%%\?*}" -c "DROP SCHEMA IF EXISTS $1 CASCADE" >/dev/null 2>&1 || true
}

# ---------------------------------------------------------------------------------------------
# One gateway run
# ---------------------------------------------------------------------------------------------
export HOOKGATE_BENCH_PAYLOAD_KEY
HOOKGATE_BENCH_PAYLOAD_KEY=$(head -c 32 /dev/urandom | base64)
export HOOKGATE_BENCH_STRIPE_SECRET="whsec_bench_$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
FAILED=0

write_config() { # dir store_url group_commit port admin_port
    cat > "$1/hookgate.toml" <<EOF
[server]
listen = "127.0.0.1:$4"

[admin]
listen = "127.0.0.1:$5"

[store]
url = "$2"
group_commit = $3

[payload_encryption]
active = 1
keys = [{ version = 1, key = "env:HOOKGATE_BENCH_PAYLOAD_KEY" }]

[log]
level = "warn"

[[endpoints]]
id = "bench"
provider = "stripe"
secrets = [{ version = "v1", value = "env:HOOKGATE_BENCH_STRIPE_SECRET" }]
EOF
    if [ -n "${BENCH_WORKER_CONCURRENCY:-}" ]; then
        printf '\n[worker]\nconcurrency = %s\n' "$BENCH_WORKER_CONCURRENCY" >> "$1/hookgate.toml"
    fi
    if [ -n "${6:-}" ]; then printf '\n%b\n' "$6" >> "$1/hookgate.toml"; fi
}

# The retention scenarios' `[retention]` section: purging (the seeded rows are 400 days old)
# or idle (nothing expires for 100 years).
retention_section() { # scenario
    case "$1" in
        *-retention) echo '[retention]\ninterval_seconds = 1' ;;
        *-retention-idle) echo '[retention]\npayload_days = 36500\nidempotency_days = 36500\ninterval_seconds = 1' ;;
        *) echo "" ;;
    esac
}

# Seeds RETENTION_ROWS finished rows received 400 days ago into the store of "$CFG_DIR". On
# SQLite the rows are seeded once into a template file that every retention scenario and run
# copies (seeding is the slow part); on PostgreSQL into each fresh schema.
seed_expired() { # scenario run_no
    local template="$TMP/seed.db"
    case "$1" in
        sqlite-*)
            if [ ! -f "$template" ]; then
                local seed_dir="$TMP/seed"
                mkdir -p "$seed_dir"
                write_config "$seed_dir" "sqlite://$template" true "$(free_port)" "$(free_port)"
                log "seeding $RETENTION_ROWS expired rows (SQLite template for every run)"
                "$BIN" bench-seed --config "$seed_dir/hookgate.toml" --rows "$RETENTION_ROWS" --days-ago 400 >&2
            fi
            # The seeder checkpoints on close, so -wal/-shm are usually gone: a missing one is
            # skipped (not a failed test, which `set -e` would take for an error).
            for f in "$template" "$template-wal" "$template-shm"; do
                if [ -f "$f" ]; then cp "$f" "$CFG_DIR/hookgate.db${f#"$template"}"; fi
            done
            ;;
        postgres-*)
            log "[$1 run $2] seeding $RETENTION_ROWS expired rows"
            "$BIN" bench-seed --config "$CFG_DIR/hookgate.toml" --rows "$RETENTION_ROWS" --days-ago 400 >&2
            ;;
    esac
}

# FACTOR x the median closed-loop rate of this scenario so far in this run (twice what it
# sustained, by default).
overload_rate() { # scenario
    python3 - "$OUT" "$1" "$OVERLOAD_FACTOR" <<'PY'
import glob, json, os, statistics, sys
out, scenario, factor = sys.argv[1], sys.argv[2], float(sys.argv[3])
rates = [json.load(open(p))["achieved_rps"] for p in glob.glob(os.path.join(out, f"{scenario}-closed-*.json"))]
print(int(factor * statistics.median(rates)) if rates else 20000)
PY
}

run_bench() { # scenario mode run_no extra-args...
    local scenario=$1 mode=$2 n=$3
    shift 3
    local json="$OUT/$scenario-$mode-$n.json" code=0
    local rate_args=(--rate 0 --connections "$CONNECTIONS")
    [ "$mode" = open ] && rate_args=(--rate "$RATE" --connections 256)
    [ "$mode" = overload ] && rate_args=(--rate "$(overload_rate "$scenario")" --connections "$OVERLOAD_CONNECTIONS")
    log "[$scenario $mode run $n] load average $(cut -d' ' -f1 /proc/loadavg)"
    "$BIN" bench --config "$CFG_DIR/hookgate.toml" --endpoint bench "${rate_args[@]}" \
        --duration "$DURATION" --duplicates "$DUPLICATES" --body-size "$BODY_SIZE" \
        --label "$scenario/$mode/$n" --json "$json" "$@" > "$TMP/bench.out" 2> "$TMP/bench.err" || code=$?
    sed "s/^/    /" "$TMP/bench.out" >&2
    if [ "$code" != 0 ]; then
        log "[$scenario $mode run $n] FAILED (exit $code)"
        sed "s/^/    /" "$TMP/bench.err" >&2
        FAILED=1
    fi
}

run_gateway_scenario() { # scenario mode run_no
    local scenario=$1 mode=$2 n=$3 url gc=true schema=""
    CFG_DIR="$TMP/$scenario-$mode-$n"
    mkdir -p "$CFG_DIR"
    case "$scenario" in
        sqlite | sqlite-retention | sqlite-retention-idle) url="sqlite://$CFG_DIR/hookgate.db" ;;
        sqlite-nogc) url="sqlite://$CFG_DIR/hookgate.db"; gc=false ;;
        postgres | postgres-nogc | postgres-retention | postgres-retention-idle)
            schema="bench_${scenario//-/_}_${mode}_$n"
            pg_drop_schema "$schema"
            case "$PG_BASE_URL" in *\?*) url="$PG_BASE_URL&schema=$schema" ;; *) url="$PG_BASE_URL?schema=$schema" ;; esac
            [ "$scenario" = postgres-nogc ] && gc=false ;;
        *) log "unknown scenario $scenario"; exit 2 ;;
    esac
    local port admin
    port=$(free_port)
    admin=$(free_port)
    write_config "$CFG_DIR" "$url" "$gc" "$port" "$admin" "$(retention_section "$scenario")"
    case "$scenario" in *-retention | *-retention-idle) seed_expired "$scenario" "$n" ;; esac
    "$BIN" serve --config "$CFG_DIR/hookgate.toml" > "$CFG_DIR/gateway.log" 2>&1 &
    GATEWAY_PID=$!
    local ready=0
    for _ in $(seq 1 100); do
        if curl -fsS "http://127.0.0.1:$admin/readyz" >/dev/null 2>&1; then ready=1; break; fi
        sleep 0.1
    done
    if [ "$ready" != 1 ]; then
        log "gateway did not become ready:"; cat "$CFG_DIR/gateway.log" >&2; exit 1
    fi
    run_bench "$scenario" "$mode" "$n" --gateway-pid "$GATEWAY_PID"
    case "$scenario" in
        *-retention | *-retention-idle)
            curl -fsS "http://127.0.0.1:$admin/metrics" 2>/dev/null \
                | grep -E '^hookgate_(retention_purged_total|oldest_payload_age_seconds)' \
                > "$OUT/$scenario-$mode-$n.retention.txt" || true ;;
    esac
    kill -TERM "$GATEWAY_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$GATEWAY_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$GATEWAY_PID" 2>/dev/null || true
    wait "$GATEWAY_PID" 2>/dev/null || true
    GATEWAY_PID=""
    [ -n "$schema" ] && pg_drop_schema "$schema"
    rm -rf "$CFG_DIR"
}

run_ceiling() { # mode run_no
    CFG_DIR="$TMP/ceiling-$1-$2"
    mkdir -p "$CFG_DIR"
    write_config "$CFG_DIR" "sqlite://$CFG_DIR/unused.db" true "$(free_port)" "$(free_port)"
    run_bench ceiling "$1" "$2" --ceiling
    rm -rf "$CFG_DIR"
}

for n in $(seq 1 "$RUNS"); do
    for scenario in "${SCENARIOS[@]}"; do
        modes=(closed open)
        case "$scenario" in sqlite | postgres) modes+=(overload) ;; esac
        for mode in "${modes[@]}"; do
            if [ "$scenario" = ceiling ]; then run_ceiling "$mode" "$n"; else run_gateway_scenario "$scenario" "$mode" "$n"; fi
        done
    done
done
rm -rf "$TMP/seed.db"* "$TMP/seed"

# ---------------------------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------------------------
python3 "$ROOT/scripts/bench-summary.py" "$OUT" "$NOTE" "$OVERLOAD_FACTOR" > "$OUT/summary.md"
echo >&2
cat "$OUT/summary.md"
log "results in $OUT (one JSON per run, summary.md, machine.txt)"
if [ "$FAILED" != 0 ]; then log "at least one run FAILED (store verification or error)"; exit 1; fi
