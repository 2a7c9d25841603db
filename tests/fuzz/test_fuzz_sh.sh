#!/bin/sh
# tests/fuzz/test_fuzz_sh.sh ROOT: ops/fuzz.sh never passes without fuzzing
# unless told to (CTest test_fuzz_sh).  Runs only its checks before any
# build: no clang needed, nothing is fuzzed.
set -u
root="$1"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ak-fuzzsh-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
check () {   # WANT_RC NEEDLE DESCRIPTION -- COMMAND...
    want=$1 needle=$2 what=$3
    shift 4
    rc=0
    "$@" >"$tmp/out" 2>&1 || rc=$?
    if [ "$rc" != "$want" ] || ! grep -q -- "$needle" "$tmp/out"; then
        echo "FAIL: $what: exit $rc (want $want), output:"
        cat "$tmp/out"
        fail=1
    else
        echo "ok: $what: exit $rc: $(head -1 "$tmp/out")"
    fi
}
export AK_FUZZ_BUILD_DIR="$tmp/build"
check 1 "AK_FUZZ_SECONDS=0" "no clang: fails, naming how to skip" -- \
    env AK_FUZZ_CC=/nonexistent/clang AK_FUZZ_SECONDS=5 "$root/ops/fuzz.sh"
check 1 "libFuzzer" "a compiler without libFuzzer: fails" -- \
    env AK_FUZZ_CC=false "$root/ops/fuzz.sh" 5
check 0 "fuzzing skipped" "AK_FUZZ_SECONDS=0: skipped on purpose" -- \
    env AK_FUZZ_CC=/nonexistent/clang AK_FUZZ_SECONDS=0 "$root/ops/fuzz.sh"
check 0 "fuzzing skipped" "SECONDS 0: skipped on purpose" -- \
    env AK_FUZZ_CC=/nonexistent/clang "$root/ops/fuzz.sh" 0
check 2 "whole number" "SECONDS not a number: refused" -- \
    env AK_FUZZ_CC=/nonexistent/clang "$root/ops/fuzz.sh" ten
check 1 "AK_FUZZ_SECONDS=0" "--build without clang: fails too" -- \
    env AK_FUZZ_CC=/nonexistent/clang "$root/ops/fuzz.sh" --build
check 2 "AK_FUZZ_PARALLEL" "AK_FUZZ_PARALLEL 0: refused" -- \
    env AK_FUZZ_CC=/nonexistent/clang AK_FUZZ_PARALLEL=0 "$root/ops/fuzz.sh" 5
[ -e "$tmp/build" ] && { echo "FAIL: ops/fuzz.sh built something"; fail=1; }
exit $fail
