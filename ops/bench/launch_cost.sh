#!/usr/bin/env bash
# ops/bench/launch_cost.sh: what `akctl discover`'s injection adds to each
# kernel launch (issue 18): ops/discover/launch_cost.py (steps of 2000
# one-element adds, each step an NVTX range) run bare and under
# `akctl discover --step-range step`, alternating, N times each.
#
#   ops/bench/launch_cost.sh [--bin DIR] [--out DIR] [--n N] [--steps S] [--launches L] [--split]
#                            [--sample K]
#
# Per configuration: the median over every measured step of the main
# thread's CPU time per launch and of the wall time per launch, and the
# range of the per-run medians; then the injection's added CPU time per
# launch (the median of run i's inject median minus plain run i's, each pair
# started back to back).  A model's step that launches K kernels pays about
# K times that on its host thread: with the K of a real step (akctl discover
# reports kernels per step) that is the injection's overhead as work, which
# the host's drifting speed disturbs far less than a step time.
# --split adds a third configuration, inject-nolaunch: the injection without
# CUPTI's launch-API records (AKD_LAUNCH_RECORDS=0; its kernels lose their
# launching thread), so that the kernel records' share of the cost and the
# launch records' share are told apart.
# --sample K adds inject-sampled: `akctl discover --sample K` (1 step in K
# traced, its launches from callbacks; the others run without CUPTI's
# records), reported over its untraced steps and its traced ones apart.
# Writes OUT/summary.json.  Needs python3 with torch (CUDA) and a build's
# binaries (default build/bin).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/build/bin"
out=""
n=6
steps=30
launches=2000
split=0
sample=0
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --n) n="$2"; shift 2 ;;
        --steps) steps="$2"; shift 2 ;;
        --launches) launches="$2"; shift 2 ;;
        --split) split=1; shift ;;
        --sample) sample="$2"; shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "launch_cost.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ "$n" -ge 3 ] || { echo "launch_cost.sh: --n must be at least 3" >&2; exit 2; }
case "$sample" in ''|*[!0-9]*) echo "launch_cost.sh: --sample K: a number" >&2; exit 2 ;; esac
if [ "$sample" = 1 ] || { [ "$sample" -ge 2 ] && [ $(( steps / sample )) -lt 1 ]; }; then
    echo "launch_cost.sh: --sample K: K at least 2 and at most --steps" >&2; exit 2
fi
[ -x "$bin/akctl" ] || { echo "launch_cost.sh: no $bin/akctl (build first, or --bin)" >&2; exit 2; }
python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null \
    || { echo "launch_cost.sh: needs python3 with torch and a CUDA device" >&2; exit 2; }
out="${out:-$(mktemp -d /tmp/akd-launch.XXXXXX)}"
mkdir -p "$out"
prog="$root/ops/discover/launch_cost.py"
warm=5
echo "date: $(date -u +%FT%TZ)  gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
echo "runs: $n per configuration, $steps steps of $launches launches each, out: $out"
for i in $(seq 1 "$n"); do
    python3 "$prog" --steps "$steps" --launches "$launches" --warmup "$warm" > "$out/plain.$i.jsonl"
    "$bin/akctl" discover --out "$out/inject.$i" --step-range step --warmup-steps "$warm" --steps "$steps" -- \
        python3 "$prog" --steps "$steps" --launches "$launches" --warmup "$warm" \
        > "$out/inject.$i.jsonl" 2> "$out/inject.$i.err" || { cat "$out/inject.$i.err" >&2; exit 1; }
    rm -f "$out/inject.$i/trace.akd"
    if [ "$split" = 1 ]; then
        AKD_LAUNCH_RECORDS=0 "$bin/akctl" discover --out "$out/inject-nolaunch.$i" --step-range step \
            --warmup-steps "$warm" --steps "$steps" -- \
            python3 "$prog" --steps "$steps" --launches "$launches" --warmup "$warm" \
            > "$out/inject-nolaunch.$i.jsonl" 2> "$out/inject-nolaunch.$i.err" \
            || { cat "$out/inject-nolaunch.$i.err" >&2; exit 1; }
        rm -f "$out/inject-nolaunch.$i/trace.akd"
    fi
    if [ "$sample" -ge 2 ]; then
        "$bin/akctl" discover --out "$out/inject-sampled.$i" --step-range step --warmup-steps "$warm" \
            --steps $(( steps / sample )) --sample "$sample" -- \
            python3 "$prog" --steps "$steps" --launches "$launches" --warmup "$warm" \
            > "$out/inject-sampled.$i.jsonl" 2> "$out/inject-sampled.$i.err" \
            || { cat "$out/inject-sampled.$i.err" >&2; exit 1; }
        rm -f "$out/inject-sampled.$i/trace.akd"
    fi
done

python3 - "$out" "$n" "$split" "$sample" <<'PY'
import json, os, statistics, sys
out, n, split, sample = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1", int(sys.argv[4])
def rows(name, i):
    return [json.loads(l) for l in open(os.path.join(out, "%s.%d.jsonl" % (name, i))) if l.startswith("{")]
summary = {"runs": n, "configs": {}}
per_run = {}
print("\n| configuration | CPU us a launch (median) | per-run medians | wall us a launch (median) |")
print("|---|---:|---|---:|")
for name in ("plain", "inject") + (("inject-nolaunch",) if split else ()):
    allr = [r for i in range(1, n + 1) for r in rows(name, i)]
    per_run[name] = [statistics.median(r["cpu_us"] for r in rows(name, i)) for i in range(1, n + 1)]
    cpu, wall = statistics.median(r["cpu_us"] for r in allr), statistics.median(r["wall_us"] for r in allr)
    summary["configs"][name] = {"cpu_us": cpu, "wall_us": wall, "cpu_us_per_run": per_run[name],
                                "steps": len(allr)}
    print("| %s | %.3f | %.3f-%.3f | %.3f |" % (name, cpu, min(per_run[name]), max(per_run[name]), wall))
diffs = [a - b for a, b in zip(per_run["inject"], per_run["plain"])]
summary["added_cpu_us_per_launch"] = {"pairs": diffs, "median": statistics.median(diffs)}
print("\nadded CPU us a launch (inject run i - plain run i): %s; median %.3f"
      % (" ".join("%.3f" % d for d in diffs), statistics.median(diffs)))
if split:
    d2 = [a - b for a, b in zip(per_run["inject-nolaunch"], per_run["plain"])]
    summary["added_cpu_us_per_launch_without_launch_records"] = {"pairs": d2, "median": statistics.median(d2)}
    print("added CPU us a launch without the launch-API records (inject-nolaunch run i - plain run i): %s; "
          "median %.3f" % (" ".join("%.3f" % d for d in d2), statistics.median(d2)))
if sample >= 2:
    # the window's step j (the printed "step") was traced when j % sample == 0
    for part, keep in (("untraced", lambda r: r["step"] % sample != 0), ("traced", lambda r: r["step"] % sample == 0)):
        med = [statistics.median(r["cpu_us"] for r in rows("inject-sampled", i) if keep (r)) for i in range(1, n + 1)]
        d3 = [a - b for a, b in zip(med, per_run["plain"])]
        summary["configs"]["inject-sampled-" + part] = {"cpu_us_per_run": med}
        summary["added_cpu_us_per_launch_sampled_" + part] = {"pairs": d3, "median": statistics.median(d3)}
        print("added CPU us a launch, --sample %d, its %s steps (run i - plain run i): %s; median %.3f"
              % (sample, part, " ".join("%.3f" % d for d in d3), statistics.median(d3)))
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print("wrote %s" % os.path.join(out, "summary.json"))
PY
