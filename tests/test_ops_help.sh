#!/bin/sh
# tests/test_ops_help.sh ROOT: every command of ops/ that a user types
# answers -h and --help with its own header, exit 0, and does nothing else
# (CTest test_ops_help): no build, no install, no file in the working
# folder.  Python scripts that need PyTorch answer it without PyTorch.
set -u
root="$1"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ak-opshelp-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fail=0
n=0
cd "$root" || exit 1
for f in ops/setup.sh ops/test.sh ops/bundle.sh ops/fuzz.sh \
         ops/bench/*.sh ops/bench/*.py ops/discover/*.py; do
    case "$f" in
        ops/bench/nightly_lib.sh | ops/bench/curve_keys.sh) continue ;;   # sourced, not run
    esac
    for opt in -h --help; do
        rc=0
        case "$f" in
            *.py) (cd "$tmp" && python3 "$root/$f" "$opt") > "$tmp/out" 2>&1 || rc=$? ;;
            *) (cd "$tmp" && "$root/$f" "$opt") > "$tmp/out" 2>&1 || rc=$? ;;
        esac
        n=$((n + 1))
        # the header names the script (its path or its file name) or is argparse's usage
        base=$(basename "$f")
        if [ "$rc" != 0 ] || ! grep -q -e "$base" -e "^usage:" "$tmp/out"; then
            echo "FAIL: $f $opt: exit $rc, output:"
            head -20 "$tmp/out"
            fail=1
        elif [ -n "$(ls -A "$tmp" | grep -v '^out$')" ]; then
            echo "FAIL: $f $opt left files in its working folder: $(ls -A "$tmp" | grep -v '^out$' | tr '\n' ' ')"
            fail=1
        else
            echo "ok: $f $opt: $(head -1 "$tmp/out")"
        fi
    done
done
echo "$n help calls checked"
exit $fail
