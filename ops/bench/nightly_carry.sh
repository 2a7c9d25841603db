#!/bin/sh
# ops/bench/nightly_carry.sh: one batch carried across several bounded runs
# of the real system (a device machine lent 10 minutes a call, a night cut
# by maintenance windows), resumed from its store each time.
#
#   ops/bench/nightly_carry.sh BIN_DIR STATE_DIR OUT_DIR SECONDS [MANIFEST]
#
# BIN_DIR holds akcoord, akworker and akctl (a bundle from ops/bundle.sh).
# STATE_DIR is what one run leaves the next: the coordinator's store, the
# batch id and calls.log (a line per run).  Without a batch in STATE_DIR the
# run starts a private akcoord on STATE_DIR/store and one akworker on the
# CUDA backend (AK_NIGHTLY_BACKEND=host without a GPU), and submits MANIFEST
# (default kernels/batches/nightly.json); with one, it starts them on the same
# store and runs `akctl resume BATCH`, which takes back at once the tasks the
# previous run's worker held when it stopped.  It follows the batch for at
# most SECONDS, then stops the worker and the coordinator cleanly and writes
# OUT_DIR/state.tgz (STATE_DIR packed, for the next run) and
# OUT_DIR/carry.txt (calls.log and the batch's status).
# Once the batch has finished it writes what ops/bench/nightly_gpu.sh writes
# (report.json, receipts.json, report.txt, report/, best_by_candidate.md,
# stats.json and, with PyTorch, compare.md/compare.json) into OUT_DIR.
# Exit status: 0 the batch finished with every task done, 1 it finished
# otherwise, 75 (EX_TEMPFAIL) it is still running: call again with the state.
# AK_NIGHTLY_PREFETCH and AK_NIGHTLY_COMPILE_THREADS (default: akworker's
# own, a compile thread per core up to 8 cores, cores - 2 above, and a task
# prefetched per compile thread) set the worker's --prefetch and
# --compile-threads.
set -eu
case "${1:-}" in -h|--help) sed -n '2,/^set -eu$/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
[ $# -ge 4 ] || { echo "usage: $0 BIN_DIR STATE_DIR OUT_DIR SECONDS [MANIFEST]" >&2; exit 2; }
root=$(cd "$(dirname "$0")/../.." && pwd)
. "$root/ops/bench/nightly_lib.sh"
nightly_need_bin "$0" "$1"
case $4 in '' | *[!0-9]*) echo "$0: SECONDS must be a whole number, not '$4'" >&2; exit 2 ;; esac
[ -z "${5:-}" ] || [ -f "$5" ] || { echo "$0: MANIFEST $5: no such file" >&2; exit 2; }
bin=$(cd "$1" && pwd)
mkdir -p "$2" "$3"
state=$(cd "$2" && pwd)
out=$(cd "$3" && pwd)
limit=$4
manifest=${5:-$root/kernels/batches/nightly.json}
export AK_SOURCE_DIR="$root"
# ipc:// paths must be short: a run directory under /tmp, not the state's.
run=$(mktemp -d /tmp/akcarry.XXXXXX)
ctl="$bin/akctl --coordinator ipc://$run/clients.ipc --timeout 60000"

"$bin/akcoord" --store "$state/store" --workers "ipc://$run/workers.ipc" \
    --clients "ipc://$run/clients.ipc" --plain --log-level info >>"$state/akcoord.log" 2>&1 &
coord=$!
worker=""
trap 'kill $worker $coord 2>/dev/null || true' EXIT
i=0
until $ctl --timeout 1000 stats >/dev/null 2>&1; do
    i=$((i + 1))
    [ $i -lt 60 ] || { echo "nightly_carry: akcoord did not answer: see $state/akcoord.log" >&2; exit 1; }
    sleep 0.5
done

call=1
[ -f "$state/calls.log" ] && call=$(($(wc -l <"$state/calls.log") + 1))
t0=$(date +%s)
if [ -s "$state/batch" ]; then
    batch=$(cat "$state/batch")
    echo "nightly_carry: run $call: resuming batch $batch"
    $ctl resume "$batch" | head -5
fi
# The worker before a submit: submit checks that a worker serves the target.
"$bin/akworker" --coordinator "ipc://$run/workers.ipc" --id carry-w1 --backend "${AK_NIGHTLY_BACKEND:-cuda}" \
    ${AK_NIGHTLY_PREFETCH:+--prefetch "$AK_NIGHTLY_PREFETCH"} ${AK_NIGHTLY_COMPILE_THREADS:+--compile-threads "$AK_NIGHTLY_COMPILE_THREADS"} --cache "$run/cache" --log-level info >>"$state/akworker.log" 2>&1 &
worker=$!
if [ ! -s "$state/batch" ]; then
    i=0
    until batch=$($ctl submit "$manifest" 2>"$run/submit.err"); do
        i=$((i + 1))
        if [ $i -ge 30 ] || ! grep -q "no worker has ever announced" "$run/submit.err"; then
            cat "$run/submit.err" >&2
            exit 1
        fi
        sleep 1
    done
    echo "$batch" >"$state/batch"
    echo "nightly_carry: run $call: batch $batch from $manifest"
fi

done_before=$($ctl status "$batch" --json | python3 -c 'import json,sys; s=json.load(sys.stdin); c=s["counts"]; print("%d/%d" % (s["total"] - c["queued"] - c["leased"], s["total"]))' 2>/dev/null || echo "?")
wrc=0
# shellcheck disable=SC2086  # ctl is a command line: split on purpose
timeout "$limit" $ctl watch "$batch" || wrc=$?
t1=$(date +%s)
kill "$worker" 2>/dev/null || true
wait "$worker" 2>/dev/null || true
worker=""
$ctl status "$batch" >"$out/status.txt" 2>&1 || true
done_after=$($ctl status "$batch" --json | python3 -c 'import json,sys; s=json.load(sys.stdin); c=s["counts"]; print("%d/%d" % (s["total"] - c["queued"] - c["leased"], s["total"]))' 2>/dev/null || echo "?")
finished=yes
[ "$wrc" -eq 124 ] && finished=no
echo "run $call: $(date -u -d "@$t0" +%FT%TZ) .. $(date -u -d "@$t1" +%FT%TZ) $((t1 - t0)) s, tasks finished $done_before -> $done_after, batch finished: $finished" \
    >>"$state/calls.log"

if [ "$finished" = yes ]; then
    nightly_results "$ctl" "$batch" "$out" "$root"
fi
$ctl shutdown >/dev/null 2>&1 || kill "$coord" 2>/dev/null || true
wait "$coord" 2>/dev/null || true
trap - EXIT
rm -rf "$run"
{ cat "$state/calls.log"; echo; cat "$out/status.txt"; } >"$out/carry.txt"
cat "$out/carry.txt"
tar czf "$out/state.tgz" -C "$state" .

[ "$finished" = yes ] || exit 75
nightly_compare "$out" "$root" || true
exit $wrc
