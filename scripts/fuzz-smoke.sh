#!/usr/bin/env bash
# Fuzz smoke run of sperli-wire: every cargo-fuzz target of
# crates/sperli-wire/fuzz for SECONDS each (default 30), starting from the
# committed seed corpus (copied to a temp dir, so the run does not grow the
# repo).
#
#   scripts/fuzz-smoke.sh [SECONDS] [TARGET...]
#
# Needs only the stable toolchain: cargo-fuzz runs with RUSTC_BOOTSTRAP=1
# (installed with `cargo install cargo-fuzz --locked` if missing). Crash
# inputs land in crates/sperli-wire/fuzz/artifacts/<target>/ and each
# target's libFuzzer log in crates/sperli-wire/fuzz/artifacts/smoke-logs/
# (both git-ignored). Extra libFuzzer flags can be passed in FUZZ_ARGS.
# Exits non-zero if any target fails (a crash, a panic, a timeout or OOM).
set -euo pipefail

duration=${1:-30}
shift || true
case $duration in
    '' | *[!0-9]*) echo "usage: $0 [SECONDS] [TARGET...]" >&2; exit 2 ;;
esac

repo=$(cd "$(dirname "$0")/.." && pwd)
fuzz_dir=$repo/crates/sperli-wire/fuzz
cd "$fuzz_dir"
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

if [ $# -gt 0 ]; then
    targets=("$@")
else
    mapfile -t targets < <(cargo fuzz list)
fi

echo "fuzz: building ${#targets[@]} targets"
build_start=$(date +%s)
cargo fuzz build
echo "fuzz: build took $(($(date +%s) - build_start)) s"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sperli-fuzz.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
logs=$fuzz_dir/artifacts/smoke-logs
mkdir -p "$logs"

passed=0
failed=0
failed_names=()
for t in "${targets[@]}"; do
    corpus=$tmp/$t
    mkdir -p "$corpus"
    if [ -d "corpus/$t" ]; then
        cp -R "corpus/$t/." "$corpus/"
    fi
    log=$logs/$t.log
    start=$(date +%s)
    # shellcheck disable=SC2086 # FUZZ_ARGS is a list of flags
    if cargo fuzz run "$t" "$corpus" -- \
        -max_total_time="$duration" -rss_limit_mb=2048 ${FUZZ_ARGS:-} >"$log" 2>&1; then
        status=clean
        passed=$((passed + 1))
    else
        status=FAILED
        failed=$((failed + 1))
        failed_names+=("$t")
    fi
    runs=$(grep -oE 'Done [0-9]+ runs' "$log" | tail -1 | grep -oE '[0-9]+' || true)
    if [ -z "$runs" ]; then
        runs=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)
    fi
    printf 'fuzz: %-16s %-6s %10s execs %4s s  corpus %s -> %s files\n' \
        "$t" "$status" "${runs:-?}" "$(($(date +%s) - start))" \
        "$(find "corpus/$t" -type f 2>/dev/null | wc -l)" "$(find "$corpus" -type f | wc -l)"
    if [ "$status" = FAILED ]; then
        grep -E -A12 "panicked at|ERROR: libFuzzer|SUMMARY|Test unit written" "$log" | head -40 | sed 's/^/    /'
        echo "    log: $log"
    fi
    rm -rf "$corpus"
done

if [ "$failed" -gt 0 ]; then
    echo "fuzz: failed targets: ${failed_names[*]}"
fi
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
