#!/bin/sh
# ops/bench/nightly_gpu.sh: the nightly batch through the real system on a GPU
# host, then the winners next to PyTorch.
#
#   ops/bench/nightly_gpu.sh BIN_DIR OUT_DIR [MANIFEST]
#
# BIN_DIR holds akcoord, akworker and akctl (a bundle from ops/bundle.sh);
# MANIFEST defaults to kernels/batches/nightly.json.  Starts a private akcoord
# (store in OUT_DIR/store) and one akworker on the CUDA backend over ipc://
# endpoints (AK_NIGHTLY_BACKEND=host to try it without a GPU), submits the
# batch and follows it, then writes into OUT_DIR:
#   report.json, receipts.json   what akctl printed (--json)
#   best_by_candidate.md         per workload, the best each candidate reached
#                                (ops/bench/best_by_candidate.py)
#   report/                      akctl report --out (Markdown, JSON, HTML)
#   compare.md, compare.json     ops/bench/torch_compare.py (needs PyTorch)
#   akcoord.log, akworker.log, timing.txt
# With AK_NIGHTLY_VERIFY=NAME, once the batch is done its promoted winners are
# installed as profile NAME (akctl profile install --unconfirmed: one worker,
# so no other worker confirmed them) and re-checked on the same
# worker (akctl verify --profile NAME --wait) before the daemons stop:
#   profile.txt                  what the install printed, then profile show
#   verify.txt, verify.json      the verdicts, and the verify-status answer
# Exit status: watch's, else (with the verify step) verify's: 0 only when the
# profile came out verified.
# AK_NIGHTLY_TARGET=CLASS submits the manifest for that device class instead
# of its own targets (akctl submit --target); AK_NIGHTLY_TARGET=worker for
# the class the worker announced (the first GPU's): kernels/batches/hopper.json,
# written for the H200, then runs on any card that worker has.
# AK_NIGHTLY_PREFETCH and AK_NIGHTLY_COMPILE_THREADS (default: akworker's
# own, a compile thread per core up to 8 cores, cores - 2 above, and a task
# prefetched per compile thread) set the worker's --prefetch and
# --compile-threads.
set -eu
case "${1:-}" in -h|--help) sed -n '2,/^set -eu$/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 2 ] || { echo "usage: $0 BIN_DIR OUT_DIR [MANIFEST] (--help for more)" >&2; exit 2; }
. "$root/ops/bench/nightly_lib.sh"
nightly_need_bin "$0" "$1"
[ -z "${3:-}" ] || [ -f "$3" ] || { echo "$0: MANIFEST $3: no such file" >&2; exit 2; }
bin=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
manifest=${3:-$root/kernels/batches/nightly.json}
export AK_SOURCE_DIR="$root"
ctl="$bin/akctl --coordinator ipc://$out/clients.ipc --timeout 30000"

plain=""
"$bin/akcoord" --help 2>&1 | grep -q -- '--plain' && plain="--plain"
"$bin/akcoord" --store "$out/store" --workers "ipc://$out/workers.ipc" \
    --clients "ipc://$out/clients.ipc" $plain --log-level info >"$out/akcoord.log" 2>&1 &
coord=$!
"$bin/akworker" --coordinator "ipc://$out/workers.ipc" --id gpu-w1 --backend "${AK_NIGHTLY_BACKEND:-cuda}" \
    ${AK_NIGHTLY_PREFETCH:+--prefetch "$AK_NIGHTLY_PREFETCH"} ${AK_NIGHTLY_COMPILE_THREADS:+--compile-threads "$AK_NIGHTLY_COMPILE_THREADS"} --cache "$out/cache" --log-level info >"$out/akworker.log" 2>&1 &
worker=$!
trap 'kill $worker $coord 2>/dev/null || true' EXIT
sleep 2

target=${AK_NIGHTLY_TARGET:-}
if [ "$target" = worker ]; then
    # the worker's first class other than host, once it has registered
    for _ in $(seq 1 30); do
        target=$($ctl workers --json 2>/dev/null | python3 -c '
import json, sys
for w in json.load(sys.stdin).get("workers", []):
    if w.get("worker_id") == "gpu-w1":
        print(next((c for c in w.get("device_classes", []) if c != "host"), ""))' 2>/dev/null || true)
        [ -n "$target" ] && break
        sleep 1
    done
    [ -n "$target" ] || { echo "nightly: AK_NIGHTLY_TARGET=worker: the worker announced no GPU class" \
                              "(see $out/akworker.log)" >&2; exit 1; }
    echo "nightly: target $target (the worker's class)"
fi

t0=$(date +%s)
batch=$($ctl submit ${target:+--target "$target"} "$manifest")
echo "nightly: batch $batch from $manifest"
rc=0
$ctl watch "$batch" || rc=$?
t1=$(date +%s)
echo "nightly: batch $batch finished (watch exit $rc) in $((t1 - t0)) s" | tee "$out/timing.txt"

nightly_results "$ctl" "$batch" "$out" "$root"
tail -40 "$out/report.txt"

# The verify step needs the worker still alive: verify tasks are pinned to
# the live workers of each entry's class.
if [ -n "${AK_NIGHTLY_VERIFY:-}" ]; then
    prof=$AK_NIGHTLY_VERIFY
    vrc=0
    { $ctl profile install "$batch" --profile "$prof" --replace --unconfirmed && $ctl profile show "$prof"; } \
        >"$out/profile.txt" 2>&1 || vrc=$?
    if [ "$vrc" -eq 0 ]; then
        t2=$(date +%s)
        $ctl verify --profile "$prof" --wait >"$out/verify.txt" 2>&1 || vrc=$?
        vbatch=$(sed -n 's/^verify batch \([^ ]*\) of profile.*/\1/p' "$out/verify.txt" | head -1)
        if [ -n "$vbatch" ]; then
            $ctl verify "$vbatch" --json >"$out/verify.json" 2>/dev/null || true
        fi
        echo "nightly: verify of profile $prof (batch ${vbatch:-?}) exit $vrc in $(($(date +%s) - t2)) s" \
            | tee -a "$out/timing.txt"
        cat "$out/verify.txt"
    else
        echo "nightly: profile install into $prof failed (exit $vrc): see $out/profile.txt" | tee -a "$out/timing.txt"
    fi
    [ "$rc" -eq 0 ] && rc=$vrc
fi
kill "$worker" 2>/dev/null || true
wait "$worker" 2>/dev/null || true
$ctl shutdown >/dev/null 2>&1 || kill "$coord" 2>/dev/null || true
wait "$coord" 2>/dev/null || true
trap - EXIT

nightly_compare "$out" "$root"
exit $rc
