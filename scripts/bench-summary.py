#!/usr/bin/env python3
"""Summarises one scripts/bench.sh run: medians per scenario and mode, the spread over runs,
group-commit ratios, shares of the HTTP ceiling and the issue's targets, as markdown.

Usage: scripts/bench-summary.py OUT_DIR NOTE OVERLOAD_FACTOR   (reads OUT_DIR/*.json)
"""
import glob, json, os, statistics, sys
out, note, OVERLOAD_FACTOR = sys.argv[1], sys.argv[2], sys.argv[3]
runs = {}
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    r = json.load(open(path))
    scenario, mode, _ = r["label"].split("/")
    runs.setdefault((scenario, mode), []).append(r)

def med(rs, key):
    vals = [r[key] for r in rs if r.get(key) is not None]
    return statistics.median(vals) if vals else None

def fmt(v, digits=1):
    if v is None: return "-"
    if isinstance(v, float): return f"{v:,.{digits}f}"
    return f"{v:,}"

def own(rs):
    v = med(rs, "gateway_ack_p99_le_ms")
    return "-" if v is None else f"≤ {v:g}"

names = {"sqlite": "SQLite, group commit", "sqlite-nogc": "SQLite, group_commit = false",
         "postgres": "PostgreSQL, group commit", "postgres-nogc": "PostgreSQL, group_commit = false",
         "ceiling": "HTTP ceiling (sink)",
         "sqlite-retention": "SQLite, purging 1M+ expired rows", "sqlite-retention-idle": "SQLite, same rows, nothing expired",
         "postgres-retention": "PostgreSQL, purging 1M+ expired rows", "postgres-retention-idle": "PostgreSQL, same rows, nothing expired"}
order = [s for s in ["sqlite", "sqlite-nogc", "postgres", "postgres-nogc", "sqlite-retention", "sqlite-retention-idle",
                     "postgres-retention", "postgres-retention-idle", "ceiling"]
         if any(k[0] == s for k in runs)]
ceiling = {m: med(runs.get(("ceiling", m), []), "achieved_rps") for m in ("closed", "open")}
any_run = next(iter(runs.values()))[0]
open_rate = next((v[0]["rate_target"] for (s_, m), v in runs.items() if m == "open"), 0)
print(f"_{note}_\n")
print(f"Medians of {max(len(v) for v in runs.values())} runs of {any_run['duration_s']:g} s each; "
      f"bodies `{any_run['body_size']}` (mean ≈ {fmt(med([r for v in runs.values() for r in v], 'mean_body_bytes'), 0)} bytes), "
      f"{any_run['duplicates_share']:g} duplicate share, Stripe signatures. Latency is of 2xx answers, "
      "from the intended send time as the load generator saw it; \"gateway's own p99\" is the upper bound of "
      "the bucket holding the 99th percentile of the gateway's `hookgate_ack_latency_seconds` for the run "
      "(arrival to answer, without the load generator's share of the CPU).\n")
print("| scenario | mode | ack/s | share of ceiling | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | gateway's own p99 ms | non-2xx | gateway CPU (cores) | gateway CPU µs/2xx | gateway RSS peak MiB | waiting for processing at the end | store verified |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
for s in order:
    for m in ("closed", "open", "overload"):
        rs = runs.get((s, m))
        if not rs: continue
        mode = {"closed": f"closed loop, {rs[0]['connections']} conns",
                "open": f"open loop {rs[0]['rate_target']:,}/s",
                "overload": f"overload: open loop {fmt(med(rs, 'rate_target'), 0)}/s, {rs[0]['connections']:,} conns"}[m]
        rps = med(rs, "achieved_rps")
        share = f"{100*rps/ceiling[m]:.0f} %" if (m == "closed" and rps and ceiling.get(m) and s != "ceiling") else "-"
        per_ack = [r["gateway_cpu_seconds"] * 1e6 / max(1, r["accepted"] + r["duplicate"] + r["ignored"] + r["other_2xx"])
                   for r in rs if r.get("gateway_cpu_seconds") is not None]
        per_ack = statistics.median(per_ack) if per_ack else None
        bad = statistics.median([r["rejected_4xx"] + r["rate_limited"] + r["unavailable"] + r["errors"] + r["not_sent"] for r in rs])
        ver = "-" if s == "ceiling" else ("yes" if all(r.get("store_verified") for r in rs) else "**NO**")
        waiting = [r["verification"]["waiting_for_processing"] for r in rs
                   if (r.get("verification") or {}).get("waiting_for_processing") is not None]
        waiting = f"{fmt(statistics.median(waiting), 0)} of {fmt(med([r['verification'] for r in rs if r.get('verification')], 'inbox_rows_added'), 0)}" if waiting else "-"
        print(f"| {names[s]} | {mode} | {fmt(rps)} | {share} | {fmt(med(rs,'p50_ms'),2)} | {fmt(med(rs,'p90_ms'),2)} | "
              f"{fmt(med(rs,'p99_ms'),2)} | {fmt(med(rs,'p999_ms'),2)} | {fmt(med(rs,'max_ms'),2)} | "
              f"{own(rs)} | {fmt(bad,0)} | "
              f"{fmt(med(rs,'gateway_cpu_cores'),2)} | {fmt(per_ack,0)} | {fmt(med(rs,'gateway_rss_peak_mib'))} | {waiting} | {ver} |")

def spread(rs, value):
    """(lowest, median, highest) of value(run) over the runs that have it; value is a key or a function."""
    get = value if callable(value) else (lambda r: r.get(value))
    vals = sorted(v for v in map(get, rs) if v is not None)
    return (vals[0], statistics.median(vals), vals[-1]) if vals else None

def waiting_of(r):
    return (r.get("verification") or {}).get("waiting_for_processing")

print(f"\nSpread over the {max(len(v) for v in runs.values())} runs (lowest – median – highest):\n")
print("| scenario | figure | lowest | median | highest |")
print("|---|---|---:|---:|---:|")
figures = (("closed", "achieved_rps", "ack/s closed loop", 0),
           ("open", "p99_ms", f"p99 ms at {open_rate:,}/s", 1),
           ("overload", "achieved_rps", "ack/s under overload", 0),
           ("overload", "gateway_ack_p99_le_ms", "overload: gateway's own p99 bucket, ms", 0),
           ("overload", "gateway_rss_peak_mib", "overload: RSS peak MiB", 1),
           ("closed", "gateway_rss_peak_mib", "closed loop: RSS peak MiB", 1))
for s in order:
    for m, key, label, digits in figures:
        sp = spread(runs.get((s, m), []), key)
        if sp:
            print(f"| {names[s]} | {label} | " + " | ".join(fmt(float(v), digits) for v in sp) + " |")
    sp = spread(runs.get((s, "closed"), []), waiting_of)
    if sp:
        print(f"| {names[s]} | rows waiting for processing after the closed loop | " + " | ".join(fmt(v, 0) for v in sp) + " |")

print("\nGroup commit on / off (closed-loop throughput, medians; measured side by side):\n")
for label, on, off, target in (("SQLite", "sqlite", "sqlite-nogc", 5), ("PostgreSQL", "postgres", "postgres-nogc", 3)):
    a, b = med(runs.get((on, "closed"), []), "achieved_rps"), med(runs.get((off, "closed"), []), "achieved_rps")
    if a and b:
        print(f"- {label}: {fmt(a)} / {fmt(b)} = **{a/b:.2f}×** (target ≥ {target}×: {'met' if a/b >= target else 'not met'})")

retention_pairs = [(l, p, i) for l, p, i in (("SQLite", "sqlite-retention", "sqlite-retention-idle"),
                                               ("PostgreSQL", "postgres-retention", "postgres-retention-idle"))
                   if any(k[0] == p for k in runs) and any(k[0] == i for k in runs)]
if retention_pairs:
    print("\nPurging vs not purging (medians; measured side by side on the same seeded rows):\n")
    def purged_in(scenario, mode):
        counts = []
        for path in glob.glob(os.path.join(sys.argv[1], f"{scenario}-{mode}-*.retention.txt")):
            rows = sum(float(l.split()[-1]) for l in open(path) if l.startswith('hookgate_retention_purged_total{what="inbox"}'))
            counts.append(rows)
        return statistics.median(counts) if counts else None
    for label, purging, idle in retention_pairs:
        for mode, key, what in (("closed", "achieved_rps", "closed-loop ack/s"), ("open", "p99_ms", "open-loop p99 ms")):
            a, b = med(runs.get((purging, mode), []), key), med(runs.get((idle, mode), []), key)
            if a and b:
                print(f"- {label} {what}: purging {fmt(a, 2)} / not purging {fmt(b, 2)} = {a/b:.2f}×"
                      f" (inbox rows purged during the run, median: {fmt(purged_in(purging, mode), 0)})")

print("\nTargets (issue #6):\n")
def target(label, scen, key, mode, op, goal, unit):
    v = med(runs.get((scen, mode), []), key)
    if v is None: return
    ok = v >= goal if op == ">=" else v <= goal
    print(f"- {label}: {fmt(v, 2 if unit == 'ms' else 1)} {unit} (target {op.replace('>=','≥').replace('<=','≤')} {goal:,} {unit}: {'met' if ok else '**not met**'})")
target("SQLite closed-loop acknowledged events/s", "sqlite", "achieved_rps", "closed", ">=", 15000, "/s")
if ceiling.get("closed") and med(runs.get(("sqlite","closed"),[]),"achieved_rps"):
    sh = med(runs[("sqlite","closed")],"achieved_rps")/ceiling["closed"]
    print(f"- SQLite share of the HTTP ceiling: {100*sh:.0f} % (target ≥ 33 %: {'met' if sh >= 1/3 else '**not met**'})")
target(f"SQLite p99 at {open_rate:,}/s open loop", "sqlite", "p99_ms", "open", "<=", 10, "ms")
target("PostgreSQL closed-loop acknowledged events/s", "postgres", "achieved_rps", "closed", ">=", 8000, "/s")
target(f"PostgreSQL p99 at {open_rate:,}/s open loop", "postgres", "p99_ms", "open", "<=", 15, "ms")
for label, scen in (("SQLite", "sqlite"), ("PostgreSQL", "postgres")):
    rs = runs.get((scen, "overload"))
    if not rs: continue
    shed = statistics.median([r["unavailable"] + r["rate_limited"] for r in rs])
    print(f"- {label} overload ({OVERLOAD_FACTOR}× its closed-loop rate): {fmt(shed, 0)} requests shed (503/429, median), "
          f"store verified in every run: {'yes' if all(r.get('store_verified') for r in rs) else '**NO**'}")
    target(f"{label} overload: accepted-request p99 (load generator's view, from the intended send time)", scen, "p99_ms", "overload", "<=", 100, "ms")
    target(f"{label} overload: accepted-request p99 (the gateway's own histogram, bucket upper bound)", scen, "gateway_ack_p99_le_ms", "overload", "<=", 100, "ms")
    target(f"{label} overload: gateway RSS peak (the issue asks 'memory bounded'; 150 MiB is its figure at 10,000/s)", scen, "gateway_rss_peak_mib", "overload", "<=", 150, "MiB")
target("SQLite closed loop (≥ 10,000/s when met above): gateway RSS peak", "sqlite", "gateway_rss_peak_mib", "closed", "<=", 150, "MiB")
