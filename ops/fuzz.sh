#!/bin/sh
# ops/fuzz.sh: build the libFuzzer targets of tests/fuzz and run each for a
# bounded time (issue 7).
#
#   ops/fuzz.sh [SECONDS]      default $AK_FUZZ_SECONDS or 15 per target;
#                              0 skips fuzzing (says so, exits 0)
#   ops/fuzz.sh --build        the checks and the build only, nothing
#                              fuzzed (ops/test.sh builds so while the
#                              suite runs, then fuzzes)
#
# Builds into build-fuzz/ ($AK_FUZZ_BUILD_DIR to change it) with clang,
# -DAK_FUZZ=ON (libFuzzer + AddressSanitizer + UBSan on every library), then
# runs every build-fuzz/fuzz/fuzz_X on a scratch copy of its seed corpus
# tests/fuzz/corpus/X/ and of its crash reproducers tests/fuzz/regressions/X/
# (the committed files are never rewritten) with -max_total_time=SECONDS,
# $AK_FUZZ_PARALLEL targets at once (default: the number of CPUs; each
# target is one single-threaded process, and -max_total_time is wall time,
# so running them side by side fuzzes each as long in less time).
# Exit status 1 as soon as a target crashes, leaks or trips a sanitizer:
# the reproducer is left in build-fuzz/crashes/ and copied into
# tests/fuzz/regressions/X/, where the suite replays it without libFuzzer
# (CTest test_fuzz_replay_X, tests/fuzz/replay.c): commit it with the fix.
# Without clang or libFuzzer it fails (exit 1) naming what to install:
# fuzzing is skipped only when asked for, with SECONDS (or
# $AK_FUZZ_SECONDS) 0.
set -eu
case "${1:-}" in -h|--help) sed -n '2,/^set -eu$/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
build_only=0
if [ "${1:-}" = --build ]; then
    build_only=1
    shift
fi
secs="${1:-${AK_FUZZ_SECONDS:-15}}"
build="${AK_FUZZ_BUILD_DIR:-$root/build-fuzz}"
cc="${AK_FUZZ_CC:-clang}"
par="${AK_FUZZ_PARALLEL:-$(nproc 2>/dev/null || echo 1)}"

case "$secs" in
    ''|*[!0-9]*) echo "ops/fuzz.sh: SECONDS must be a whole number, not '$secs'" >&2; exit 2 ;;
esac
case "$par" in
    ''|0|*[!0-9]*) echo "ops/fuzz.sh: AK_FUZZ_PARALLEL must be a whole number from 1, not '$par'" >&2; exit 2 ;;
esac
if [ "$secs" -eq 0 ] && [ "$build_only" = 0 ]; then
    echo "ops/fuzz.sh: fuzzing skipped (SECONDS / AK_FUZZ_SECONDS is 0)"
    exit 0
fi
if ! command -v "$cc" >/dev/null 2>&1 \
   || ! echo 'int LLVMFuzzerTestOneInput(const char*d,unsigned long n){return 0;}' \
        | "$cc" -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
    echo "ops/fuzz.sh: no $cc with libFuzzer here, so nothing was fuzzed: install clang and" \
         "libclang-rt-14-dev (ops/deps.sh; ops/test.sh installs them), or skip fuzzing" \
         "explicitly with AK_FUZZ_SECONDS=0" >&2
    exit 1
fi

CC="$cc" cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DAK_FUZZ=ON -DAK_WERROR=ON >/dev/null
targets=$(cd "$root/tests/fuzz" && ls fuzz_*.c | sed 's/\.c$//')
# shellcheck disable=SC2086
cmake --build "$build" -j "${AK_FUZZ_JOBS:-2}" --target $targets

[ "$build_only" = 1 ] && exit 0

mkdir -p "$build/crashes"
# One target on a scratch copy of its seeds; its exit status into
# build-fuzz/fuzz_X.rc, its output into build-fuzz/fuzz_X.log.
fuzz_one () {
    t=$1
    name=${t#fuzz_}
    work="$build/corpus/$name"
    rm -rf "$work"
    rm -f "$build/crashes/$name-"*
    mkdir -p "$work"
    for seeds in "$root/tests/fuzz/corpus/$name" "$root/tests/fuzz/regressions/$name"; do
        [ -d "$seeds" ] && find "$seeds" -maxdepth 1 -type f -exec cp {} "$work"/ \;
    done
    rc=0
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$build/fuzz/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
            -artifact_prefix="$build/crashes/$name-" "$work" >"$build/$t.log" 2>&1 || rc=$?
    echo "$rc" >"$build/$t.rc"
}
running=0
for t in $targets; do
    name=${t#fuzz_}
    echo "== $t: $secs s (seeds: tests/fuzz/corpus/$name, tests/fuzz/regressions/$name)"
    rm -f "$build/$t.rc"
    fuzz_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$par" ]; then
        wait
        running=0
    fi
done
wait
status=0
for t in $targets; do
    name=${t#fuzz_}
    if [ "$(cat "$build/$t.rc" 2>/dev/null || echo 1)" != 0 ]; then
        echo "ops/fuzz.sh: $t FAILED (log $build/$t.log; reproducer in $build/crashes/):" >&2
        tail -40 "$build/$t.log" >&2
        # keep the reproducers as regression tests (test_fuzz_replay_$name)
        keep="$root/tests/fuzz/regressions/$name"
        for f in "$build/crashes/$name-"*; do
            [ -f "$f" ] || continue
            mkdir -p "$keep"
            cp "$f" "$keep/"
            echo "ops/fuzz.sh: kept $(basename "$f") in tests/fuzz/regressions/$name/:" \
                 "test_fuzz_replay_$name replays it; commit it with the fix" >&2
        done
        status=1
    else
        echo "$t: $(grep -E "stat::number_of_executed_units|cov:" "$build/$t.log" | tail -2 | tr '\n' ' ')"
    fi
done
exit $status
