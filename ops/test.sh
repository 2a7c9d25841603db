#!/bin/sh
# ops/test.sh: install what is missing, build under sanitizers, run every test.
#
#   ops/test.sh [CTEST OPTIONS]     e.g. ops/test.sh -L unit   or   -R test_e2e
#
# Builds into build-test/ ($AK_BUILD_DIR to change it) with AddressSanitizer
# and UBSan and warnings as errors, then runs the whole suite with ctest:
# unit, integration and fault tests, and gpu tests (which skip themselves
# where there is no GPU).  $AK_TEST_JOBS runs that many tests at once
# (default: up to 4).  The exit code is ctest's.
set -eu
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
cd "$build"
exec ctest --output-on-failure -j "$jobs" "$@"
