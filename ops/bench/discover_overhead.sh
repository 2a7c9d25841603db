#!/usr/bin/env bash
# ops/bench/discover_overhead.sh: what `akctl discover` costs and how well it
# accounts for GPU time (issue 18, Benchmark), on the Llama-style demo model
# (ops/discover/llama_demo.py: hidden 2048, 8 layers, 16 heads, vocab 32000,
# bf16, prefill 1x512 + 8 decode steps per repeat).
#
#   ops/bench/discover_overhead.sh [--bin DIR] [--out DIR] [--n N] [--repeats R]
#                                  [--configs LIST] [--cuda-graph] [--sample K]
#                                  [--variant TAG:VAR=VALUE[,VAR=VALUE...]]...
#
# Runs, interleaved N times (default 5) each:
#   plain     python3 llama_demo.py --step-times               (no injection)
#   inject    akctl discover ... -- python3 llama_demo.py --step-times
#             (libakdiscover.so with the demo's own "step" ranges: the
#             injection's own overhead)
#   launcher  akctl discover ... -- python3 torch_nvtx.py llama_demo.py --step-times
#             (plus emit_nvtx(record_shapes) and the module ranges: what a
#             user pays for shapes and dtypes, the default)
#   launcher_catalog  the same with torch_nvtx.py --ranges catalog (ranges
#             for the catalog's operators only, no emit_nvtx)
#   inject_sampled  (with --sample K, K >= 2) inject with akctl discover
#             --sample K: 1 step in K traced, the window as long as inject's
#             (its --steps a K-th of it); the other steps run without
#             CUPTI's kernel records.  Its medians mix traced and
#             untraced steps: see the mean column, which counts every
#             step, and the table of its steps by their place in the
#             sampling cycle (traced, the step after, the rest)
#   inject_sampled_TAG  (each --variant, with --sample) inject_sampled with
#             the variant's variables in akctl discover's environment, e.g.
#             --variant pinned:AKD_CUPTI_PINNED=1 or
#             --variant noflush:AKD_SAMPLE_FLUSH=0 (docs/discover.md):
#             interleaved with the others, so one run compares them
# (--configs: a comma-separated subset of inject,launcher,launcher_catalog;
# plain always runs: the others are ratios to it) and once torch.profiler
# over the same steps (llama_demo.py --torch-profiler).  --cuda-graph runs
# every one of them with llama_demo.py --cuda-graph: a repeat (prefill and
# decode steps) is one CUDA graph replayed in one "step" range, as a
# serving engine replays its decode loop; the tables' "decode" columns are
# then those replays (kind "graph"), and prefill is not measured apart.
# Step times are the demo's own (perf_counter around each step, ending in a
# synchronise), over the repeats after the first.  As each of the N runs
# ends it prints that run's decode medians and their ratios to plain's (a
# run cut short keeps those lines); at the end a table, and it writes
# OUT/summary.json:
#   - per configuration: median step time (prefill and decode separately),
#     the mean decode step and its ratio to plain's mean,
#     the range of the per-run medians, and the ratio to plain (goal:
#     inject <= 1.05); and the paired ratios (run i's decode median over
#     plain run i's, which ran just before it: the host's speed drifts
#     over seconds, and a pair cancels most of that) with their median;
#   - the CPU time a decode step takes (the process's, all threads, and
#     the main thread's) and its ratio to plain: the host cost without the
#     time spent waiting for a CPU;
#   - coverage: % of GPU time under a named range and mapped to the catalog
#     (from each launcher mode's first run), and the workloads each found
#     (catalog mode must find those of the default mode);
#   - the trace size of each configuration's first run;
#   - total kernel time per step: discover (inject run) vs torch.profiler
#     (goal: within 3%).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin="$root/build/bin"
out=""
n=5
repeats=3
configs="inject,launcher,launcher_catalog"
graph=0
sample=0
variants=()                             # TAG:VAR=VALUE[,VAR=VALUE...]
while [ $# -gt 0 ]; do
    case "$1" in
        --bin) bin="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --n) n="$2"; shift 2 ;;
        --repeats) repeats="$2"; shift 2 ;;
        --configs) configs="$2"; shift 2 ;;
        --cuda-graph) graph=1; shift ;;
        --sample) sample="$2"; shift 2 ;;
        --variant) variants+=("$2"); shift 2 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "discover_overhead.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
[ "$n" -ge 5 ] || { echo "discover_overhead.sh: --n must be at least 5" >&2; exit 2; }
[ "$repeats" -ge 2 ] || { echo "discover_overhead.sh: --repeats must be at least 2" >&2; exit 2; }
case "$sample" in ''|*[!0-9]*) echo "discover_overhead.sh: --sample K: a number" >&2; exit 2 ;; esac
if [ "$sample" -ge 2 ]; then
    configs="$configs,inject_sampled"
elif [ "$sample" != 0 ]; then
    echo "discover_overhead.sh: --sample K: K at least 2" >&2; exit 2
fi
# each variant: a tag of [a-z0-9_], then VAR=VALUE pairs of AKD_ variables
vnames=""
for v in ${variants[@]+"${variants[@]}"}; do
    tag=${v%%:*}
    vars=${v#*:}
    [ "$sample" -ge 2 ] || { echo "discover_overhead.sh: --variant needs --sample K" >&2; exit 2; }
    case "$tag" in ''|*[!a-z0-9_]*) echo "discover_overhead.sh: --variant $v: TAG of a-z, 0-9 and _" >&2; exit 2 ;; esac
    [ "$tag" != "$v" ] || { echo "discover_overhead.sh: --variant $v: TAG:VAR=VALUE[,VAR=VALUE...]" >&2; exit 2; }
    for kv in $(echo "$vars" | tr , ' '); do
        case "$kv" in AKD_*=*) ;; *) echo "discover_overhead.sh: --variant $v: '$kv' is not AKD_VAR=VALUE" >&2
                                     exit 2 ;; esac
    done
    case ",$vnames," in *",inject_sampled_$tag,"*) echo "discover_overhead.sh: --variant $tag twice" >&2; exit 2 ;; esac
    vnames="${vnames:+$vnames,}inject_sampled_$tag"
done
for c in $(echo "$configs" | tr , ' '); do
    case "$c" in
        inject|launcher|launcher_catalog|inject_sampled) ;;
        *) echo "discover_overhead.sh: --configs: unknown configuration '$c' (inject, launcher, launcher_catalog)" >&2
           exit 2 ;;
    esac
done
want() { case ",$configs," in *",$1,"*) return 0 ;; esac; return 1; }
out="${out:-$(mktemp -d /tmp/akd-bench.XXXXXX)}"
mkdir -p "$out"
akctl="$bin/akctl"
demo="$root/ops/discover/llama_demo.py"
launcher="$root/ops/discover/torch_nvtx.py"
steps_per_repeat=9                      # 1 prefill + 8 decode (llama_demo.py defaults)
demo_args=""
if [ "$graph" = 1 ]; then
    steps_per_repeat=1                  # one graph replay a repeat
    demo_args="--cuda-graph"
fi
warm=$steps_per_repeat
measured=$(( (repeats - 1) * steps_per_repeat ))
if [ "$sample" -ge 2 ] && [ $(( measured / sample )) -lt 1 ]; then
    echo "discover_overhead.sh: --sample $sample: more than the $measured measured steps (raise --repeats)" >&2; exit 2
fi
[ -x "$akctl" ] || { echo "discover_overhead.sh: no $akctl (build first, or --bin)" >&2; exit 2; }
python3 -c 'import torch, transformers; assert torch.cuda.is_available()' \
    || { echo "discover_overhead.sh: needs python3 with torch (CUDA) and transformers" >&2; exit 2; }

echo "date: $(date -u +%FT%TZ)  host: $(hostname)  gpu: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
echo "runs: $n interleaved per configuration, $repeats repeats each (first is warm-up), out: $out${demo_args:+, $demo_args}"
# Run i of configuration NAME: the demo under akctl discover, started as
# python3 ARGS... (its step times into NAME.i.jsonl).
discovered() {
    name=$1
    shift
    window="--steps $measured"
    case "$name" in inject_sampled*) window="--steps $(( measured / sample )) --sample $sample" ;; esac
    "$akctl" discover --out "$out/$name.$i" --step-range step --warmup-steps "$warm" $window -- \
        python3 "$@" --repeats "$repeats" --step-times $demo_args > "$out/$name.$i.jsonl" 2> "$out/$name.$i.err" \
        || { cat "$out/$name.$i.err" >&2
             # records akctl discover refuses as impossible leave the step times good
             grep -q "times cannot be true" "$out/$name.$i.err" || exit 1
             echo "discover_overhead.sh: $name run $i: akctl discover printed no figures; its step times are kept" >&2; }
}
for i in $(seq 1 "$n"); do
    python3 "$demo" --repeats "$repeats" --step-times $demo_args > "$out/plain.$i.jsonl"
    want inject && discovered inject "$demo"
    want inject_sampled && discovered inject_sampled "$demo"
    want launcher && discovered launcher "$launcher" "$demo"
    want launcher_catalog && discovered launcher_catalog "$launcher" --ranges catalog "$demo"
    for v in ${variants[@]+"${variants[@]}"}; do
        # shellcheck disable=SC2046 # the variant's VAR=VALUE pairs, one word each
        ( export $(echo "${v#*:}" | tr , ' '); discovered "inject_sampled_${v%%:*}" "$demo" )
    done
    # this run's decode (or replay) medians, printed as it ends: a run cut
    # short keeps what its finished runs measured
    python3 - "$out" "$i" plain inject inject_sampled launcher launcher_catalog $(echo "$vnames" | tr , ' ') <<'PY'
import json, os, statistics, sys
out, i, parts = sys.argv[1], sys.argv[2], []
base = None
for name in sys.argv[3:]:
    path = os.path.join(out, "%s.%s.jsonl" % (name, i))
    if not os.path.exists(path):
        continue
    ms = [r["ms"] for r in (json.loads(l) for l in open(path) if l.strip().startswith("{"))
          if r.get("kind") in ("decode", "graph")]
    if not ms:
        continue
    m = statistics.median(ms)
    base = m if name == "plain" else base
    parts.append("%s %.3f ms%s" % (name, m, "" if name == "plain" or not base else " (%.3f)" % (m / base)))
print("run %s: decode medians: %s" % (i, ", ".join(parts)))
PY
    echo "run $i of $n done"
done
python3 "$demo" --repeats "$repeats" --torch-profiler "$out/torch_profiler.json" $demo_args > /dev/null

python3 - "$out" "$n" "$configs" "$warm" "$sample" "$vnames" <<'PY'
import json, statistics, sys, os
out, n, warm, sample = sys.argv[1], int(sys.argv[2]), int(sys.argv[4]), int(sys.argv[5])
variants = [v for v in sys.argv[6].split(",") if v]
configs = ["plain"] + sys.argv[3].split(",") + variants
names = [c for c in ("plain", "inject", "inject_sampled", "launcher", "launcher_catalog") if c in configs] + variants
# every run's step records, read once
runs = {name: {i: [json.loads(line) for line in open(os.path.join(out, "%s.%d.jsonl" % (name, i)))
                   if line.strip().startswith("{")] for i in range(1, n + 1)} for name in names}
def steps(name, only=None, field="ms"):
    rows = {"prefill": [], "decode": []}
    for i in (range(1, n + 1) if only is None else [only]):
        for r in runs[name][i]:
            if field in r:
                rows["decode" if r["kind"] == "graph" else r["kind"]].append(r[field])
    return rows
summary = {"runs": n, "configs": {}}
base = steps("plain")
# each run's decode median, per configuration
per_run = {name: [statistics.median(steps(name, i)["decode"]) for i in range(1, n + 1)] for name in names}
print("\n| configuration | prefill ms (median) | decode ms (median) | per-run decode medians | prefill ratio "
      "| decode ratio | decode ms (mean) | mean ratio | trace bytes |")
print("|---|---|---|---|---|---|---|---|---|")
for name in names:
    r = steps(name)
    d = statistics.median(r["decode"])
    rd = d / statistics.median(base["decode"])
    # --cuda-graph: no prefill steps of their own (a replay is the whole repeat)
    p = statistics.median(r["prefill"]) if r["prefill"] else None
    rp = p / statistics.median(base["prefill"]) if p is not None and base["prefill"] else None
    trace = os.path.join(out, name + ".1", "trace.akd")
    size = os.path.getsize(trace) if os.path.exists(trace) else 0
    mean = statistics.mean(r["decode"])
    mean_ratio = mean / statistics.mean(base["decode"])
    summary["configs"][name] = {"prefill_ms": p, "decode_ms": d, "prefill_ratio": rp, "decode_ratio": rd,
                                "decode_ms_mean": mean, "decode_mean_ratio": mean_ratio,
                                "decode_ms_per_run": per_run[name], "trace_bytes": size,
                                "samples": len(r["prefill"]) + len(r["decode"])}
    fmt = lambda v: "-" if v is None else "%.3f" % v
    print("| %s | %s | %.3f | %.3f-%.3f | %s | %.3f | %.3f | %.3f | %d |" % (name, fmt(p), d, min(per_run[name]),
                                                                         max(per_run[name]), fmt(rp), rd, mean,
                                                                         mean_ratio, size))
# Paired: run i of a configuration against plain's run i, which ran just
# before it (the host's speed drifts over seconds: the pairs cancel most of it).
print("\n| configuration | decode ratio per pair (run i / plain run i) | median | runs <= 1.05 |")
print("|---|---|---|---|")
for name in names[1:]:
    pairs = [a / b for a, b in zip(per_run[name], per_run["plain"])]
    summary["configs"][name]["decode_ratio_pairs"] = pairs
    summary["configs"][name]["decode_ratio_pairs_median"] = statistics.median(pairs)
    print("| %s | %s | %.3f | %d of %d |" % (name, " ".join("%.3f" % r for r in pairs), statistics.median(pairs),
                                           sum(r <= 1.05 for r in pairs), n))
# Sampled: the steps by their place in the sampling cycle (the window opens
# after the warm-up steps; its step j is traced when j % K == 0): the
# traced steps, the step after each (the records go off, and the traced
# step's records are flushed, as it opens) and the rest, each against
# plain's steps of the same numbers: where the sampled run's added time
# goes.
def cls(step):
    j = (step - warm) % sample
    return "traced" if j == 0 else "after" if j == 1 else "rest"
for name in (c for c in names if c.startswith("inject_sampled") and sample >= 2):
    print("\n| %s steps (K %d) | steps | ms (mean) | plain ms (mean, same steps) | ratio |" % (name, sample))
    print("|---|---|---|---|---|")
    summary["configs"][name]["by_place"] = {}
    for place in ("traced", "after", "rest"):
        ms, base_ms = [], []
        for i in range(1, n + 1):
            plain_at = {r["step"]: r["ms"] for r in runs["plain"][i] if r["kind"] in ("decode", "graph")}
            for r in runs[name][i]:
                if r["kind"] in ("decode", "graph") and cls(r["step"]) == place and r["step"] in plain_at:
                    ms.append(r["ms"])
                    base_ms.append(plain_at[r["step"]])
        if ms:
            m, b = statistics.mean(ms), statistics.mean(base_ms)
            summary["configs"][name]["by_place"][place] = {"steps": len(ms), "ms_mean": m,
                                                          "plain_ms_mean": b, "ratio": m / b}
            print("| %s | %d | %.3f | %.3f | %.3f |" % (place, len(ms), m, b, m / b))
# CPU time a decode step (the process over all its threads, and its main
# thread): what the injection adds on the host, without the time the
# process waited for a CPU (a shared host's steal and contention move wall
# time far more than 5% from run to run).
if steps("plain", field="cpu_ms")["decode"]:            # demos before 2026-12-02 print no CPU times
    cpu_base = {f: statistics.median(steps("plain", field=f)["decode"]) for f in ("cpu_ms", "thread_cpu_ms")}
    print("\n| configuration | decode CPU ms (process, median) | ratio | main thread CPU ms (median) | ratio |")
    print("|---|---|---|---|---|")
    for name in names:
        row = []
        for f in ("cpu_ms", "thread_cpu_ms"):
            v = statistics.median(steps(name, field=f)["decode"])
            row += [v, v / cpu_base[f]]
            summary["configs"][name]["decode_" + f] = v
            summary["configs"][name]["decode_" + f + "_ratio"] = v / cpu_base[f]
        print("| %s | %.3f | %.3f | %.3f | %.3f |" % (name, *row))
def hotspots(name):
    path = os.path.join(out, name + ".1", "hotspots.json")
    return json.load(open(path)) if name in configs and os.path.exists(path) else None
def workloads(h):
    return sorted(set(w["name"] for w in h.get("workloads", [])))
hot, hot_cat, inj_hot = hotspots("launcher"), hotspots("launcher_catalog"), hotspots("inject")
if hot is not None and hot_cat is not None:
    found, found_cat = workloads(hot), workloads(hot_cat)
    summary["workloads"] = {"launcher": found, "launcher_catalog": found_cat,
                            "missing_in_catalog_mode": [w for w in found if w not in found_cat]}
    print("\nworkloads: launcher %d, launcher --ranges catalog %d; missing in catalog mode: %s"
          % (len(found), len(found_cat), ", ".join(summary["workloads"]["missing_in_catalog_mode"]) or "none"))
summary["coverage"] = {}
for name, h in (("launcher", hot), ("launcher_catalog", hot_cat)):
    if h is not None:
        t = h["totals"]
        summary["coverage"][name] = {"named_pct": t["pct_gpu_time_in_named_range"],
                                     "catalog_pct": t["pct_gpu_time_mapped_to_catalog"]}
        print("coverage (%s run 1): %.1f%% of GPU time under a named range, %.1f%% mapped to catalog operators"
              % (name, t["pct_gpu_time_in_named_range"], t["pct_gpu_time_mapped_to_catalog"]))
if inj_hot is not None:
    inj = inj_hot["totals"]
    tp = json.load(open(os.path.join(out, "torch_profiler.json")))
    tp_per_step = tp["kernel_us"] / tp["steps"]
    diff = (inj["gpu_us_per_step"] - tp_per_step) / tp_per_step * 100 if tp_per_step else float("nan")
    summary["kernel_time"] = {"discover_us_per_step": inj["gpu_us_per_step"],
                              "torch_profiler_us_per_step": tp_per_step, "diff_pct": diff}
    print("kernel time per step: discover %.1f us, torch.profiler %.1f us (%+.2f%%)"
          % (inj["gpu_us_per_step"], tp_per_step, diff))
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
print("\nwrote %s/summary.json" % out)
PY
