#!/usr/bin/env bash
# ops/bench/curve_cost.sh: what CURVE costs the coordinator (issue 7, Benchmark).
#
#   ops/bench/curve_cost.sh [--bin DIR] [--out DIR] [--rounds N] [--duration S]
#                           [--warmup S] [--workers "100 1000"] [--keep]
#
# A REAL akcoord (durable commits, the default) against akload simulated
# workers over tcp://127.0.0.1, as ops/bench/coord_scale.sh does, twice per
# round: once with --plain and once with CURVE (--cert/--keys; akload with a
# worker certificate, the stats calls with an operator one), interleaved
# (plain, curve, plain, curve ...) so that a machine shared with other work
# loads both alike.  Each run starts from a copy of one store of 100,000
# queued tasks (the coord_scale manifest) and reports akload's round trips
# per second (receipts ACKed per second after the warm-up), the
# dispatch->ack latency p50/p99 and akcoord's CPU per round trip.  Prints a
# Markdown table of the medians and the curve/plain ratios; results.json and
# every log under --out.  Needs bash, jq and a build (default build/bin).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/build/bin"
out=""
rounds=3
duration=8
warmup=2
workers_list="100 1000"
keep=0
spec="$root/kernels/softmax/spec.json"

while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin=$2; shift 2 ;;
        --out) out=$2; shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        --duration) duration=$2; shift 2 ;;
        --warmup) warmup=$2; shift 2 ;;
        --workers) workers_list=$2; shift 2 ;;
        --keep) keep=1; shift ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "curve_cost: unknown argument '$1' (try --help)" >&2; exit 2 ;;
    esac
done
command -v jq >/dev/null || { echo "curve_cost: needs jq" >&2; exit 2; }
for b in akcoord akctl akload; do
    [ -x "$bin/$b" ] || { echo "curve_cost: no $bin/$b (build first, or --bin DIR)" >&2; exit 2; }
done
[ -n "$out" ] || out=$(mktemp -d /tmp/curve_cost.XXXXXX)
mkdir -p "$out"
work=$(mktemp -d /tmp/curve_cost_work.XXXXXX)

port_free () { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
while :; do
    wport=$(( 20000 + RANDOM % 12000 )); cport=$(( wport + 1 ))
    port_free "$wport" && port_free "$cport" && break
done
wep="tcp://127.0.0.1:$wport"
cep="tcp://127.0.0.1:$cport"

coord_pid=""
load_pid=""
cleanup () {
    for p in $load_pid $coord_pid; do kill -TERM "$p" 2>/dev/null || true; done
    for p in $load_pid $coord_pid; do wait "$p" 2>/dev/null || true; done
    [ "$keep" = 1 ] || rm -rf "$work"
}
trap cleanup EXIT

# keys: the coordinator's, one worker key for every simulated worker, an operator
. "$root/ops/bench/curve_keys.sh"
curve_keys "$bin" "$work"

mode=plain
ctl () {
    if [ "$mode" = curve ]; then
        AK_CERT="$ctl_cert" AK_SERVER_KEY="$server_pub" \
            "$bin/akctl" --coordinator "$cep" "$@"
    else
        AK_CERT="" AK_SERVER_KEY="" "$bin/akctl" --coordinator "$cep" "$@"
    fi
}
stat_of () { ctl --json stats | jq -r ".$1"; }
proc_ticks () { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo -1; }

start_coord () {
    local store=$1 log=$2; shift 2
    local auth=(--plain)
    [ "$mode" = curve ] && auth=(--cert "$server_secret" --keys "$keys")
    "$bin/akcoord" "${auth[@]}" --store "$store" --workers "$wep" --clients "$cep" "$@" >"$log" 2>&1 &
    coord_pid=$!
    local i
    for i in $(seq 1 3000); do
        kill -0 "$coord_pid" 2>/dev/null || break
        if port_free "$cport"; then sleep 0.01; continue; fi
        ctl --timeout 10000 stats >/dev/null && return 0
    done
    echo "curve_cost: akcoord did not answer (log $log)" >&2
    exit 1
}
stop_coord () {
    kill -TERM "$coord_pid"
    wait "$coord_pid" || { echo "curve_cost: akcoord exited with $?" >&2; exit 1; }
    coord_pid=""
}

seqc () { seq -s, "$1" "$2"; }
cat >"$work/manifest.json" <<JSON
{
  "schema_version": 1, "name": "curve-cost", "targets": ["host"],
  "policy": {"max_attempts": 3, "lease_ms": 60000, "search": {"strategy": "exhaustive"}},
  "ops": [{
    "spec": "$spec", "workloads": ["tiny"], "candidates": [],
    "extra_candidates": [
      {"name": "scale_a", "backend": "host",
       "source": {"name": "scale.c", "text": "/* curve_cost: akload never compiles this */\n"},
       "params": {"P": [$(seqc 1 1000)], "Q": [$(seqc 1 50)]}},
      {"name": "scale_b", "backend": "host",
       "source": {"name": "scale.c", "text": "/* curve_cost: akload never compiles this */\n"},
       "params": {"P": [$(seqc 1 1000)], "Q": [$(seqc 1 50)]}, "constraints": ["P*Q < 50000"]}
    ]}]
}
JSON

echo "curve_cost: $(date -u +%FT%TZ) on $(hostname), $(nproc) CPUs, results in $out" >&2
tmpl="$work/tmpl"
start_coord "$tmpl" "$out/coord-submit.log" --log-level warn
tasks=$(ctl --timeout 120000 --json submit --allow-unserved "$work/manifest.json" | jq -r .tasks)
stop_coord
echo "curve_cost: store with $tasks tasks" >&2

runs="$out/runs.jsonl"
: >"$runs"
run_load () {
    local n=$1 round=$2
    local name="$mode-$n-r$round" store="$work/store"
    rm -rf "$store"
    cp -r "$tmpl" "$store"
    start_coord "$store" "$out/coord-$name.log"
    local lauth=()
    [ "$mode" = curve ] && lauth=(--cert "$load_cert" --server-key "$server_pub")
    AK_CERT="" AK_SERVER_KEY="" "$bin/akload" "${lauth[@]}" --coordinator "$wep" --workers "$n" \
        --duration-s "$duration" --warmup-s "$warmup" --log-level warn \
        --stats-json "$out/akload-$name.json" >"$out/akload-$name.out" 2>&1 &
    load_pid=$!
    sleep "$warmup"
    local k0 k1 l0 l1 r0 r1
    k0=$(proc_ticks "$coord_pid"); l0=$(proc_ticks "$load_pid"); r0=$(stat_of receipts_accepted)
    sleep $(( duration - warmup - 1 ))
    k1=$(proc_ticks "$coord_pid"); l1=$(proc_ticks "$load_pid"); r1=$(stat_of receipts_accepted)
    local refused
    refused=$(ctl --json stats | jq '.security.handshakes_refused.workers')
    wait "$load_pid"; load_pid=""
    stop_coord
    local cus lus
    cus=$(jq -n "if ($r1 - $r0) > 0 then (($k1 - $k0) * 10000 / ($r1 - $r0) | round) else null end")
    lus=$(jq -n "if ($r1 - $r0) > 0 then (($l1 - $l0) * 10000 / ($r1 - $r0) | round) else null end")
    jq -c --arg mode "$mode" --argjson n "$n" --argjson round "$round" --argjson cus "$cus" --argjson lus "$lus" \
          --argjson refused "$refused" \
       '{mode: $mode, workers: $n, round: $round, round_trips_per_s: (.round_trips_per_s | round),
         p50_ms: .dispatch_to_ack_latency.p50_ms, p99_ms: .dispatch_to_ack_latency.p99_ms,
         akcoord_cpu_us_per_rt: $cus, akload_cpu_us_per_rt: $lus, handshakes_refused: $refused,
         reconnects: .counts.reconnects, silences: .counts.coordinator_silences,
         handshake_failures: .counts.handshake_failures, all_registered_s: .all_registered_s}' \
       "$out/akload-$name.json" | tee -a "$runs" >&2
}

for n in $workers_list; do
    for r in $(seq 1 "$rounds"); do
        for m in plain curve; do
            mode=$m
            run_load "$n" "$r"
        done
    done
done

jq -s '
  def median: sort | if length == 0 then null elif length % 2 == 1 then .[length / 2 | floor]
              else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  group_by (.workers) | map ({
    workers: .[0].workers,
    plain: (map (select (.mode == "plain")) | {rt: (map (.round_trips_per_s) | median), p50: (map (.p50_ms) | median),
            p99: (map (.p99_ms) | median), cpu: (map (.akcoord_cpu_us_per_rt) | median),
            lcpu: (map (.akload_cpu_us_per_rt) | median), reconnects: (map (.reconnects) | add),
            all: map (.round_trips_per_s)}),
    curve: (map (select (.mode == "curve")) | {rt: (map (.round_trips_per_s) | median), p50: (map (.p50_ms) | median),
            p99: (map (.p99_ms) | median), cpu: (map (.akcoord_cpu_us_per_rt) | median),
            lcpu: (map (.akload_cpu_us_per_rt) | median), reconnects: (map (.reconnects) | add),
            silences: (map (.silences) | add), registered_s: map (.all_registered_s),
            all: map (.round_trips_per_s)})
  })' "$runs" >"$out/results.json"

echo
echo "| workers | round trips/s plain -> curve (median; each round) | ratio | dispatch->ack p50 / p99 ms plain -> curve | akcoord CPU us/rt plain -> curve | ratio | akload CPU us/rt plain -> curve | reconnects plain / curve (all rounds) | curve cold start: every worker registered within s (each round), coordinator silences |"
echo "|---|---|---|---|---|---|---|---|---|"
jq -r '.[] | "| \(.workers) | \(.plain.rt) -> \(.curve.rt) (\(.plain.all | join (", ")) / \(.curve.all | join (", "))) | \(if .plain.rt > 0 then (.curve.rt / .plain.rt * 100 | round / 100) else "-" end) | \(.plain.p50) / \(.plain.p99) -> \(.curve.p50) / \(.curve.p99) | \(.plain.cpu) -> \(.curve.cpu) | \(if .plain.cpu > 0 then (.curve.cpu / .plain.cpu * 100 | round / 100) else "-" end) | \(.plain.lcpu) -> \(.curve.lcpu) | \(.plain.reconnects) / \(.curve.reconnects) | \(.curve.registered_s | map (if . == null then "not all" else (. * 100 | round / 100 | tostring) end) | join (", ")), \(.curve.silences) |"' "$out/results.json"
