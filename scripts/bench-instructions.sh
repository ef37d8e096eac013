#!/usr/bin/env bash
# Counts the CPU instructions hookgate spends per acknowledged event, under valgrind's
# callgrind: a figure that does not depend on how busy the machine is (wall-clock benchmarks
# on a shared 2-core machine move by 2x; instruction counts of the same binary and load repeat
# within a few percent). Use it to compare two builds of the gateway side by side — a change
# on the hot path shows its before/after pair — and `scripts/bench.sh` for throughput.
#
# For each binary given (default: this tree's release build), one run per BENCH_RUNS:
#   1. start `hookgate serve` under callgrind on a fresh SQLite database (the bench.sh config:
#      one Stripe endpoint, group commit on, the default processing workers);
#   2. warm up; count INSTR_DURATION seconds of idling (timers, the stages' polls);
#   3. run that binary's own `hookgate bench` closed-loop for INSTR_DURATION seconds (the load
#      generator runs natively, outside valgrind, and is not counted);
#   4. wait until every accepted row is processed (no RECEIVED row left), dump the counters;
#   5. print instructions per acknowledged event net of the idle cost of that wall time, in
#      total and split by thread.
# Usage: scripts/bench-instructions.sh [BIN ...]
# Environment: BENCH_RUNS [3]  INSTR_DURATION seconds [15]  INSTR_CONNECTIONS [8]
#   INSTR_BODY_SIZE [2KiB] (one size: the mixed distribution's rare 1 MiB bodies dominate small samples)
#   BENCH_WORKER_CONCURRENCY (as in bench.sh; 0 = acceptance only)  INSTR_OUT [bench-results/instructions]
# Needs: valgrind (callgrind_control, callgrind_annotate), python3.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
RUNS=${BENCH_RUNS:-3}
DURATION=${INSTR_DURATION:-15}
CONNECTIONS=${INSTR_CONNECTIONS:-8}
BODY_SIZE=${INSTR_BODY_SIZE:-2KiB}
OUT=${INSTR_OUT:-bench-results/instructions}
if [ "$#" -eq 0 ]; then
    cargo build --release -p hookgate >&2
    set -- "${CARGO_TARGET_DIR:-$ROOT/target}/release/hookgate"
fi
for tool in valgrind callgrind_control callgrind_annotate python3; do
    command -v "$tool" >/dev/null || { echo "bench-instructions.sh: $tool not found (apt-get install valgrind python3)" >&2; exit 2; }
done
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
TMP=$(mktemp -d /tmp/hookgate-instr.XXXXXX)
GW_PID=""
cleanup() {
    if [ -n "$GW_PID" ]; then kill -9 "$GW_PID" 2>/dev/null || true; fi
    rm -rf "$TMP"
}
trap cleanup EXIT
log() { echo "bench-instructions.sh: $*" >&2; }

export HOOKGATE_BENCH_PAYLOAD_KEY="$(head -c 32 /dev/urandom | base64)"
export HOOKGATE_BENCH_STRIPE_SECRET="whsec_bench_$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

write_config() { # dir port admin_port
    cat > "$1/hookgate.toml" <<EOF
[server]
listen = "127.0.0.1:$2"

[admin]
listen = "127.0.0.1:$3"

[store]
url = "sqlite://$1/hookgate.db"

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
}

# Whether something accepts connections on the port yet (older builds print no listening line).
listening() { # port
    python3 -c 'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' "$1" 2>/dev/null
}

received_rows() { # db
    python3 - "$1" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True, timeout=30)
print(db.execute("SELECT count(*) FROM inbox WHERE status = 'RECEIVED'").fetchone()[0])
PY
}

# Waits (bounded) until the workers have processed every accepted row; acceptance-only runs
# (BENCH_WORKER_CONCURRENCY=0) have no workers and nothing to wait for.
drain() { # dir
    local i
    [ "${BENCH_WORKER_CONCURRENCY:-}" = 0 ] && return 0
    for i in $(seq 1 600); do
        [ "$(received_rows "$1/hookgate.db")" = 0 ] && return 0
        sleep 1
    done
    log "rows still RECEIVED after 600 s"
}

run_one() { # bin label run_no
    local bin=$1 label=$2 n=$3 dir="$TMP/$2-$3" port up="" i
    mkdir -p "$dir"
    port=$(free_port)
    write_config "$dir" "$port" "$(free_port)"
    valgrind --tool=callgrind --separate-threads=yes --dump-instr=no --compress-strings=no --compress-pos=no \
        --callgrind-out-file="$dir/callgrind.%p" \
        "$bin" serve --config "$dir/hookgate.toml" > "$dir/stdout" 2> "$dir/stderr" &
    GW_PID=$!
    for i in $(seq 1 600); do
        if listening "$port"; then up=1; break; fi
        kill -0 "$GW_PID" 2>/dev/null || { cat "$dir/stderr" >&2; exit 1; }
        sleep 0.2
    done
    [ -n "$up" ] || { log "$label: the gateway did not listen on $port"; exit 1; }
    "$bin" bench --config "$dir/hookgate.toml" --endpoint bench --rate 0 --connections 2 \
        --duration 3 --duplicates 0 --label warmup >/dev/null 2>&1 || true
    drain "$dir"
    # Idle first: what the process spends per second doing nothing (timers, the stages'
    # polls). Under valgrind the gateway acknowledges only tens to hundreds of events a second,
    # so this per-second cost is subtracted from the loaded phase to give the cost of the work.
    callgrind_control -z "$GW_PID" >/dev/null
    sleep "$DURATION"
    callgrind_control -d "$GW_PID" >/dev/null            # part 1: idle for DURATION seconds
    callgrind_control -z "$GW_PID" >/dev/null
    local started ended
    started=$(date +%s.%N)
    "$bin" bench --config "$dir/hookgate.toml" --endpoint bench --rate 0 --connections "$CONNECTIONS" \
        --duration "$DURATION" --duplicates 0.1 --body-size "$BODY_SIZE" --label "$label/$n" --json "$OUT/$label-$n.json" >/dev/null 2>"$dir/bench.err" \
        || { log "$label: bench failed"; cat "$dir/bench.err" >&2; }
    drain "$dir"
    ended=$(date +%s.%N)
    callgrind_control -d "$GW_PID" >/dev/null            # part 2: the load, then the drain
    kill -TERM "$GW_PID"; wait "$GW_PID" 2>/dev/null || true
    GW_PID=""
    python3 - "$dir" "$OUT/$label-$n.json" "$label" "$n" "$DURATION" "$started" "$ended" <<'PY' | tee -a "$OUT/summary.txt"
import glob, json, os, re, sys
dir, report, label, n = sys.argv[1:5]
idle_s, loaded_s = float(sys.argv[5]), float(sys.argv[7]) - float(sys.argv[6])
r = json.load(open(report))
acks = r["accepted"] + r["duplicate"]

def part(k):
    """Per-thread totals and exclusive cost per function of dump part k (all threads)."""
    totals, functions = {}, {}
    for path in glob.glob(os.path.join(dir, f"callgrind.*.{k}-*")):
        thread = re.search(r"-(\d+)$", path).group(1)
        current, skip_call_cost = "?", False
        for line in open(path, errors="replace"):
            if line.startswith("summary:"):
                totals[thread] = int(line.split()[1])
            elif line.startswith("fn="):
                current = line[3:].strip()
            elif line.startswith("calls="):
                skip_call_cost = True  # the next cost line is the callee's inclusive cost
            elif line[:1].isdigit() or line[:1] in "+-*":
                if skip_call_cost:
                    skip_call_cost = False
                else:
                    functions[current] = functions.get(current, 0) + int(line.split()[-1])
    return totals, functions

idle_totals, idle_functions = part(1)
totals, functions = part(2)
scale = loaded_s / idle_s  # idle cost accrues per second of wall time
net = {t: v - scale * idle_totals.get(t, 0) for t, v in totals.items()}
net_functions = {f: v - scale * idle_functions.get(f, 0) for f, v in functions.items()}
total, net_total = sum(totals.values()), sum(net.values())
by_thread = " ".join(f"t{t}={v / max(acks, 1):.0f}" for t, v in sorted(net.items()) if abs(v) >= acks)
print(f"{label} run {n}: acks {acks} in {loaded_s:.0f} s  instructions/ack {net_total / max(acks, 1):.0f} "
      f"net of idle ({total / max(acks, 1):.0f} gross; idle {sum(idle_totals.values()) / idle_s:.0f}/s)  ({by_thread})")
json.dump({"acks": acks, "total": net_total, "functions": net_functions},
          open(os.path.join(os.path.dirname(report), f"{label}-{n}.functions.json"), "w"))
PY
    for f in "$dir"/callgrind.*.2-*; do [ -e "$f" ] && cp "$f" "$OUT/$label-$n.$(basename "$f")"; done
}

: > "$OUT/summary.txt"
for n in $(seq 1 "$RUNS"); do
    i=0
    for bin in "$@"; do
        i=$((i + 1))
        run_one "$bin" "bin$i" "$n"
    done
done
if [ "$#" -ge 2 ]; then
    # Where the first two binaries differ most, per acknowledged event (summed over runs).
    python3 - "$OUT" <<'PY' | tee -a "$OUT/summary.txt"
import glob, json, os, sys
out = sys.argv[1]
def load(label):
    acks, funcs = 0, {}
    for path in glob.glob(os.path.join(out, f"{label}-*.functions.json")):
        d = json.load(open(path))
        acks += d["acks"]
        for name, v in d["functions"].items():
            funcs[name] = funcs.get(name, 0) + v
    return {k: v / max(acks, 1) for k, v in funcs.items()}
a, b = load("bin1"), load("bin2")
print(f"instructions/ack: bin1 {sum(a.values()):.0f}  bin2 {sum(b.values()):.0f}  ratio bin2/bin1 {sum(b.values()) / max(sum(a.values()), 1):.3f}")
print("largest differences per ack (bin2 - bin1), by function:")
for name in sorted(set(a) | set(b), key=lambda k: -abs(b.get(k, 0) - a.get(k, 0)))[:25]:
    print(f"  {b.get(name, 0) - a.get(name, 0):+10.0f}  bin1 {a.get(name, 0):9.0f}  bin2 {b.get(name, 0):9.0f}  {name[:150]}")
PY
fi
log "results in $OUT (summary.txt; per-thread callgrind dumps for callgrind_annotate)"
