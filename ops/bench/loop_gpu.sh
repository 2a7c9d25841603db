#!/bin/sh
# ops/bench/loop_gpu.sh: the whole model loop on one GPU host, end to end:
# discover -> tune -> install -> export -> apply + gate (issues 18 and 19).
#
#   ops/bench/loop_gpu.sh BIN_DIR OUT_DIR
#
# BIN_DIR holds akcoord, akworker, akctl and lib/ (a bundle from
# ops/bundle.sh).  Needs python3 with torch (CUDA) and transformers.
#   1. akctl discover on ops/discover/llama_demo.py (the same Llama shapes
#      as ops/apply/llama_gate.py) -> OUT/discover/{hotspots.md,batch.json}
#   2. a private akcoord and one CUDA akworker (ipc:// in OUT) tune that
#      batch, with a shorter timing policy than the emitted one
#      ($AK_LOOP_POLICY, JSON, replaces "policy"; confirm is off: one worker)
#   3. akctl profile install + export -> OUT/pkg
#   4. akctl gate on ops/apply/llama_gate.py, for every operator the
#      profile has and for each operator alone ($AK_LOOP_GATE_OPS, space
#      separated, default "all rms_norm linear scaled_dot_product_attention"),
#      each eagerly and with the step replayed from CUDA graphs
#      ($AK_LOOP_GATE_MODES, default "eager cuda_graph")
#   5. akctl profile record-gate of the first of those gates, and
#      akctl profile show (the verdict kept with the profile)
# Writes OUT/loop.txt (what each step printed) and OUT/gate.OPS.MODE.json.
# The discover run's size: $AK_LOOP_DEMO_ARGS (llama_demo.py's options,
# default "--repeats 2"); the gate's: $AK_LOOP_GATE_ARGS (llama_gate.py's,
# default none: 4 layers).
set -eu
case "${1:-}" in -h|--help) sed -n '2,/^set -eu$/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
root=$(cd "$(dirname "$0")/../.." && pwd)
[ $# -ge 2 ] || { echo "usage: $0 BIN_DIR OUT_DIR (--help for more)" >&2; exit 2; }
. "$root/ops/bench/nightly_lib.sh"
nightly_need_bin "$0" "$1"
bin=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)
export AK_SOURCE_DIR="$root"
ctl="$bin/akctl --coordinator ipc://$out/clients.ipc --timeout 30000"
log="$out/loop.txt"
say () { echo "== $*" | tee -a "$log"; }

say "1. discover"
"$bin/akctl" discover --out "$out/discover" --step-range step --warmup-steps 9 --steps 9 -- \
    python3 "$root/ops/discover/torch_nvtx.py" "$root/ops/discover/llama_demo.py" ${AK_LOOP_DEMO_ARGS:---repeats 2} \
    2>&1 | tee -a "$log"

say "2. tune"
policy=${AK_LOOP_POLICY:-'{"warmup": 2, "min_samples": 10, "max_samples": 40, "max_time_ms": 300, "confirm": false, "search": {"budget": 12, "keep": 3}}'}
python3 - "$out/discover/batch.json" "$out/discover/loop_batch.json" "$policy" <<'PY'
import json, sys
b = json.load(open(sys.argv[1]))
b["policy"] = json.loads(sys.argv[3])
json.dump(b, open(sys.argv[2], "w"), indent=2)
PY
plain=""
"$bin/akcoord" --help 2>&1 | grep -q -- '--plain' && plain="--plain"
"$bin/akcoord" --store "$out/store" --workers "ipc://$out/workers.ipc" \
    --clients "ipc://$out/clients.ipc" $plain --log-level info >"$out/akcoord.log" 2>&1 &
coord=$!
"$bin/akworker" --coordinator "ipc://$out/workers.ipc" --id loop-w1 --backend cuda \
    --cache "$out/cache" --log-level info >"$out/akworker.log" 2>&1 &
worker=$!
trap 'kill $worker $coord 2>/dev/null || true' EXIT
i=0
until $ctl workers 2>/dev/null | grep -q loop-w1; do
    i=$((i + 1)); [ $i -lt 60 ] || { echo "loop: the worker did not register" >&2; exit 1; }; sleep 1
done
B=$($ctl submit "$out/discover/loop_batch.json")
echo "batch $B" | tee -a "$log"
$ctl watch "$B" 2>&1 | tail -3 | tee -a "$log" || true
$ctl report "$B" 2>&1 | tee -a "$log" | tail -60

say "3. install + export"
# one GPU worker: the confirmation ran on the worker that measured the winners
$ctl profile install "$B" --profile llama --unconfirmed 2>&1 | tee -a "$log"
rm -rf "$out/pkg"
$ctl profile export llama "$out/pkg" 2>&1 | tee -a "$log"

say "4. gate"
first=""
for ops in ${AK_LOOP_GATE_OPS:-all rms_norm linear scaled_dot_product_attention}; do
    for mode in ${AK_LOOP_GATE_MODES:-eager cuda_graph}; do
        opt=""; [ "$ops" = all ] || opt="--ops $ops"
        [ "$mode" = cuda_graph ] && opt="$opt --cuda-graph"
        say "gate ($ops, $mode)"
        "$bin/akctl" gate --profile "$out/pkg" --steps 20 $opt --out "$out/gate.$ops.$mode.json" \
            --tolerance-file "$root/ops/apply/llama_gate.tolerance.json" \
            -- python3 "$root/ops/apply/llama_gate.py" --copy ${AK_LOOP_GATE_ARGS:-} 2>&1 | tail -25 \
            | tee -a "$log" || true
        [ -n "$first" ] || first="$out/gate.$ops.$mode.json"
    done
done

say "5. record the gate"
if [ -f "$first" ]; then
    $ctl profile record-gate "$first" 2>&1 | tee -a "$log" || true
fi
$ctl profile show llama 2>&1 | tee -a "$log" | head -30
