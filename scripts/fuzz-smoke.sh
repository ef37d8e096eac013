#!/usr/bin/env bash
# Smoke run of the fuzz targets of hookgate-providers (docs/fuzzing.md): builds them on stable
# without a sanitizer, seeds each from testdata/vectors, and fuzzes each briefly. A crash, a
# panic or an assertion of a target fails the run; its input stays under fuzz/artifacts/.
#
#   FUZZ_SECONDS   seconds per target (default 20; 7 targets stay within the CI budget)
#   FUZZ_TARGETS   space-separated subset (default: every target cargo fuzz lists)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${FUZZ_SECONDS:-20}"
crate=crates/hookgate-providers
# The fuzz workspace builds with its own flags: keep its artifacts beside it, not in the main
# target dir.
target_dir="$PWD/$crate/fuzz/target"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz (cached in ~/.cargo/bin)"
    cargo install cargo-fuzz --locked
fi

# The instrumented release build needs a few GiB; a full disk makes the linker die of SIGBUS,
# which reads like a toolchain bug. Say what is wrong instead.
need_kib=$((3 * 1024 * 1024))
free_kib=$(df -Pk "$PWD" | awk 'NR == 2 { print $4 }')
if [ "$free_kib" -lt "$need_kib" ]; then
    echo "fuzz smoke run: only $((free_kib / 1024)) MiB free on $(df -P "$PWD" | awk 'NR == 2 { print $6 }');" \
        "the fuzz build needs at least 3 GiB (free space, e.g. cargo clean in other checkouts)" >&2
    exit 1
fi

cd "$crate"
echo "== cargo fuzz build (stable, --sanitizer none)"
cargo fuzz build --sanitizer none --target-dir "$target_dir"
python3 ../../scripts/fuzz-seeds.py fuzz/corpus >/dev/null

targets="${FUZZ_TARGETS:-$(cargo fuzz list)}"
for target in $targets; do
    echo "== fuzz $target for ${seconds}s"
    start=$(date +%s)
    log="$target_dir/smoke-$target.log"
    status=0
    cargo fuzz run --sanitizer none --target-dir "$target_dir" "$target" "fuzz/corpus/$target" -- \
        -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 >"$log" 2>&1 || status=$?
    grep -E '^stat::number_of_executed_units' "$log" || true
    if [ "$status" -ne 0 ]; then
        tail -n 60 "$log" >&2
        echo "fuzz target $target failed (exit $status); reproduce with:" >&2
        echo "  cd $crate && cargo fuzz run --sanitizer none $target fuzz/artifacts/$target/<input>" >&2
        exit "$status"
    fi
    echo "   $target: $(( $(date +%s) - start ))s, no crash"
done
