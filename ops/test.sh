#!/bin/sh
# ops/test.sh: install what is missing, build under sanitizers, run every test.
#
#   ops/test.sh [CTEST OPTIONS]     e.g. ops/test.sh -L unit   or   -R test_e2e
#
# Builds into build-test/ ($AK_BUILD_DIR to change it) with AddressSanitizer
# and UBSan and warnings as errors, then runs the whole suite with ctest:
# unit, integration and fault tests, the fuzz targets' corpora and crash
# reproducers replayed without libFuzzer, and gpu tests (which skip
# themselves where there is no GPU, and fail on any other CUDA probe error;
# AK_REQUIRE_GPU=1 fails every such skip).  A test that skipped something
# is listed by ctest as "Not Run" (Skipped), not as passed.  $AK_TEST_JOBS
# runs that many tests at once (default: up to 4).  When no ctest options
# were given, the optimized build (RelWithDebInfo, what setup.sh and
# bundle.sh build) is compiled with warnings as errors too, into
# build-test-rel/ (gcc warns of some things only at -O2; there the test
# and benchmark programs are compiled, not linked: AK_LINK_TESTS=OFF;
# and without -g, which changes no warning and was a quarter of its CPU),
# and so are the libFuzzer targets (build-fuzz/): both while the suite
# runs, at the lowest CPU priority (nice 19), so that they take the CPU
# the suite's tests leave idle while they wait on heartbeats and timers,
# and little else; their output is in build-test/optimized-build.log
# and build-test/fuzz-build.log.  After the suite the targets run for
# $AK_FUZZ_SECONDS each (ops/fuzz.sh; default 10; 0 skips them on
# purpose, and without clang ops/fuzz.sh fails).  The exit code is
# non-zero when a test, a build or a target failed.
set -eu
case "${1:-}" in -h|--help) sed -n '2,/^set -eu$/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/ops/deps.sh"

build="${AK_BUILD_DIR:-$root/build-test}"
ak_install_deps
[ "${AK_OPTIONAL_DEPS_INSTALL:-0}" = 1 ] && ak_install_optional_deps
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Debug -DAK_SANITIZE=ON -DAK_WERROR=ON
cmake --build "$build" -j "$(ak_jobs)"

jobs="${AK_TEST_JOBS:-}"
if [ -z "$jobs" ]; then
    jobs=$(nproc 2>/dev/null || echo 2)
    [ "$jobs" -gt 4 ] && jobs=4
fi
fuzz_secs="${AK_FUZZ_SECONDS:-10}"
# The optimized build, compiled only (its warnings are errors too), then
# the fuzz targets' build: one background job, at the lowest priority.
bg=""
if [ $# -eq 0 ]; then
    rel="${build}-rel"
    (
        brc=0
        { nice -n 19 cmake -S "$root" -B "$rel" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAK_WERROR=ON \
            -DAK_LINK_TESTS=OFF "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -DNDEBUG" \
          && nice -n 19 cmake --build "$rel" -j "$(ak_jobs)"; } >"$build/optimized-build.log" 2>&1 \
            || { echo "ops/test.sh: the optimized -Werror build failed (log $build/optimized-build.log):" >&2
                 tail -40 "$build/optimized-build.log" >&2; brc=1; }
        if [ "$fuzz_secs" != 0 ]; then
            nice -n 19 "$root/ops/fuzz.sh" --build >"$build/fuzz-build.log" 2>&1 \
                || { echo "ops/test.sh: the fuzz targets' build failed (log $build/fuzz-build.log):" >&2
                     tail -40 "$build/fuzz-build.log" >&2; brc=1; }
        fi
        exit $brc
    ) </dev/null &
    bg=$!
fi
cd "$build"
rc=0
# The "exhaustive" label (every configuration of the tuning spaces compiled,
# hours: docs/cuda-backend.md) runs only when asked: ops/test.sh -L exhaustive.
if [ $# -eq 0 ]; then
    ctest --output-on-failure -j "$jobs" -LE exhaustive || rc=$?
else
    ctest --output-on-failure -j "$jobs" "$@" || rc=$?
fi
if [ -n "$bg" ]; then
    wait "$bg" || rc=1
fi
# The libFuzzer targets (tests/fuzz), each for a bounded time, after the
# suite: $AK_FUZZ_SECONDS per target (default 10; 0 skips them).
if [ "$fuzz_secs" != 0 ] && [ $# -eq 0 ]; then
    "$root/ops/fuzz.sh" "$fuzz_secs" || rc=1
fi
exit $rc
