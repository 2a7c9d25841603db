#!/bin/sh
# ops/fuzz.sh: build the libFuzzer targets of tests/fuzz and run each for a
# bounded time (issue 7).
#
#   ops/fuzz.sh [SECONDS]      default $AK_FUZZ_SECONDS or 15 per target
#
# Builds into build-fuzz/ ($AK_FUZZ_BUILD_DIR to change it) with clang,
# -DAK_FUZZ=ON (libFuzzer + AddressSanitizer + UBSan on every library), then
# runs every build-fuzz/fuzz/fuzz_X on a scratch copy of its seed corpus
# tests/fuzz/corpus/X/ (the committed seeds are never rewritten) with
# -max_total_time=SECONDS.  Exit status 1 as soon as a target crashes, leaks
# or trips a sanitizer: the reproducer is left in build-fuzz/crashes/ and
# becomes a regression test (tests/unit/test_fuzz_regress.c replays every
# file under tests/fuzz/regress/X/).  Without clang or libFuzzer it says so
# and exits 0 unless $AK_FUZZ_REQUIRED=1.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
secs="${1:-${AK_FUZZ_SECONDS:-15}}"
build="${AK_FUZZ_BUILD_DIR:-$root/build-fuzz}"
cc="${AK_FUZZ_CC:-clang}"

if ! command -v "$cc" >/dev/null 2>&1 \
   || ! echo 'int LLVMFuzzerTestOneInput(const char*d,unsigned long n){return 0;}' \
        | "$cc" -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
    echo "ops/fuzz.sh: no $cc with libFuzzer here: fuzz targets not run" >&2
    [ "${AK_FUZZ_REQUIRED:-0}" = 1 ] && exit 1
    exit 0
fi

CC="$cc" cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DAK_FUZZ=ON -DAK_WERROR=ON >/dev/null
targets=$(cd "$root/tests/fuzz" && ls fuzz_*.c | sed 's/\.c$//')
# shellcheck disable=SC2086
cmake --build "$build" -j "${AK_FUZZ_JOBS:-2}" --target $targets

mkdir -p "$build/crashes"
status=0
for t in $targets; do
    name=${t#fuzz_}
    work="$build/corpus/$name"
    rm -rf "$work"
    mkdir -p "$work"
    [ -d "$root/tests/fuzz/corpus/$name" ] && cp "$root/tests/fuzz/corpus/$name"/* "$work"/ 2>/dev/null || true
    echo "== $t: $secs s (seeds: tests/fuzz/corpus/$name)"
    if ! ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
         "$build/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
             -artifact_prefix="$build/crashes/$name-" "$work" >"$build/$t.log" 2>&1; then
        echo "ops/fuzz.sh: $t FAILED (log $build/$t.log; reproducer in $build/crashes/):" >&2
        tail -40 "$build/$t.log" >&2
        status=1
    else
        grep -E "stat::number_of_executed_units|cov:" "$build/$t.log" | tail -2
    fi
done
exit $status
