#!/usr/bin/env bash
# Fuzz smoke run: every cargo-fuzz target of crates/sperli-wire/fuzz and
# of crates/sperli-transport/fuzz (the `connection` state-machine target,
# docs/reliability.md) for SECONDS each (default 30), starting from the
# committed seed corpus (copied to a temp dir, so the run does not grow the
# repo). TARGET names are looked up in both projects.
#
#   scripts/fuzz-smoke.sh [SECONDS] [TARGET...]
#
# Needs only the stable toolchain: cargo-fuzz runs with RUSTC_BOOTSTRAP=1
# (installed with `cargo install cargo-fuzz --locked` if missing). Crash
# inputs land in crates/<crate>/fuzz/artifacts/<target>/ and each
# target's libFuzzer log in crates/<crate>/fuzz/artifacts/smoke-logs/
# (both git-ignored). Extra libFuzzer flags can be passed in FUZZ_ARGS.
# Exits non-zero if any target fails (a crash, a panic, a timeout or OOM).
set -euo pipefail

duration=${1:-30}
shift || true
case $duration in
    '' | *[!0-9]*) echo "usage: $0 [SECONDS] [TARGET...]" >&2; exit 2 ;;
esac

repo=$(cd "$(dirname "$0")/.." && pwd)
export RUSTC_BOOTSTRAP=1

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sperli-fuzz.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0
failed_names=()
wanted=("$@")

# Runs the targets of the cargo-fuzz project in $1 (all, or those of
# $wanted that it has).
run_project() {
    local fuzz_dir=$1
    cd "$fuzz_dir"
    local all targets=()
    mapfile -t all < <(cargo fuzz list)
    if [ ${#wanted[@]} -gt 0 ]; then
        for t in "${wanted[@]}"; do
            if printf '%s\n' "${all[@]}" | grep -qx -- "$t"; then targets+=("$t"); fi
        done
    else
        targets=("${all[@]}")
    fi
    [ ${#targets[@]} -gt 0 ] || return 0
    echo "fuzz: building ${#targets[@]} targets of ${fuzz_dir#"$repo"/}"
    local build_start
    build_start=$(date +%s)
    cargo fuzz build
    echo "fuzz: build took $(($(date +%s) - build_start)) s"
    local logs=$fuzz_dir/artifacts/smoke-logs
    mkdir -p "$logs"
    local t corpus log start status runs
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
}

run_project "$repo/crates/sperli-wire/fuzz"
run_project "$repo/crates/sperli-transport/fuzz"

if [ "$failed" -gt 0 ]; then
    echo "fuzz: failed targets: ${failed_names[*]}"
fi
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
