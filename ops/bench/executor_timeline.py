#!/usr/bin/env python3
"""ops/bench/executor_timeline.py: where a batch's wall time went on the
workers' executors, from its receipts.

    python3 ops/bench/executor_timeline.py RECEIPTS.json [--gaps N] [--json]

RECEIPTS.json is what `akctl receipts BATCH --json` prints (nightly_gpu.sh
writes it as receipts.json).  For each device (worker, device index) in
each run of its worker (worker_started_ms: a batch carried across calls has
one per call, and the time between them is no device's) the receipts'
started_at_ms / finished_at_ms give the span from the first
task's start to the last one's end, the time with a task on the executor
("busy") and the time between tasks ("idle": the executor waiting for a
compile or for the coordinator), with the N longest idle gaps and the task
each preceded.  Then, over all receipts, per operator and task kind: the
task count, their time on the executor, and what the receipts say of it:
gates (gate_ms), timing (timing_ms), inside timed samples (sampled_ms),
compile (compile_ms: on the worker's compile pool, beside the executor);
and the gates' cost split (gate_cost: inputs, reference, copies, launches,
comparison) summed over the batch.  Figures of one run: compare runs side
by side, never one number alone.  --json prints the same as one object.
"""
import argparse
import collections
import json
import signal
import sys
import time


def load(path):
    with open(path) as f:
        doc = json.load(f)
    recs = doc.get("receipts") if isinstance(doc, dict) else doc
    if not isinstance(recs, list):
        sys.exit("%s: no receipts list (want `akctl receipts BATCH --json`)" % path)
    return [r for r in recs if isinstance(r, dict) and r.get("started_at_ms") and r.get("finished_at_ms")]


def devices(recs, ngaps):
    by = collections.defaultdict(list)
    for r in recs:
        dev = r.get("device") or {}
        by[(r.get("worker_id") or "?", dev.get("index", 0), int(r.get("worker_started_ms") or 0))].append(r)
    out = []
    for (worker, index, run), rs in sorted(by.items()):
        rs.sort(key=lambda r: r["started_at_ms"])
        t0 = rs[0]["started_at_ms"]
        end = t0
        busy = 0
        gaps = []
        for r in rs:
            s, e = r["started_at_ms"], r["finished_at_ms"]
            if s > end:
                gaps.append({"ms": s - end, "at_s": (end - t0) / 1000.0,
                             "before": "%s %s %s" % (r.get("op", "?"), r.get("kind", "?"),
                                                     r.get("candidate_name") or "")})
            busy += max(0, e - max(s, end))
            end = max(end, e)
        gaps.sort(key=lambda g: -g["ms"])
        span = end - t0
        out.append({"worker": worker, "device": index, "worker_started_ms": run, "tasks": len(rs),
                    "span_s": span / 1000.0,
                    "busy_s": busy / 1000.0, "idle_s": (span - busy) / 1000.0, "gaps": gaps[:ngaps]})
    return out


def by_kind(recs):
    agg = collections.OrderedDict()
    cost = collections.Counter()
    for r in sorted(recs, key=lambda r: (r.get("op", ""), r.get("kind", ""))):
        k = "%s/%s" % (r.get("op", "?"), r.get("kind", "?"))
        a = agg.setdefault(k, collections.Counter())
        a["tasks"] += 1
        a["executor_s"] += (r["finished_at_ms"] - r["started_at_ms"]) / 1000.0
        for f in ("gate_ms", "timing_ms", "sampled_ms", "compile_ms"):
            a[f[:-3] + "_s"] += (r.get(f) or 0) / 1000.0
        for f, v in (r.get("gate_cost") or {}).items():
            if f.endswith("_ms") and isinstance(v, (int, float)):
                cost[f[:-3] + "_s"] += v / 1000.0
    rows = [dict(kind=k, **{f: (round(v, 3) if isinstance(v, float) else v) for f, v in a.items()})
            for k, a in sorted(agg.items(), key=lambda kv: -kv[1]["executor_s"])]
    return rows, {f: round(v, 3) for f, v in cost.items()}


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)      # `| head` ends it quietly
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("receipts", help="akctl receipts BATCH --json output")
    ap.add_argument("--gaps", type=int, default=8, help="longest idle gaps to list per device (default 8)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of text")
    a = ap.parse_args()
    recs = load(a.receipts)
    if not recs:
        sys.exit("%s: no receipts with start and end times" % a.receipts)
    devs = devices(recs, a.gaps)
    kinds, cost = by_kind(recs)
    if a.json:
        json.dump({"devices": devs, "by_kind": kinds, "gate_cost_s": cost}, sys.stdout, indent=1)
        print()
        return
    runs = collections.Counter((d["worker"], d["device"]) for d in devs)
    for d in devs:
        run = ""
        if runs[(d["worker"], d["device"])] > 1:
            run = " (worker run started %s)" % time.strftime(
                "%Y-%m-%dT%H:%M:%SZ", time.gmtime(d["worker_started_ms"] / 1000.0))
        print("%s device %s%s: %d tasks, span %.1f s, executor busy %.1f s, idle %.1f s (%.0f%%)"
              % (d["worker"], d["device"], run, d["tasks"], d["span_s"], d["busy_s"], d["idle_s"],
                 100.0 * d["idle_s"] / d["span_s"] if d["span_s"] else 0.0))
        for g in d["gaps"]:
            print("  idle %.2f s at %.1f s, before %s" % (g["ms"] / 1000.0, g["at_s"], g["before"]))
    print()
    print("| operator/kind | tasks | on the executor (s) | gates (s) | timing (s) | in timed samples (s) | compile (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for k in kinds:
        print("| %s | %d | %.2f | %.2f | %.2f | %.2f | %.2f |"
              % (k["kind"], k["tasks"], k.get("executor_s", 0), k.get("gate_s", 0), k.get("timing_s", 0),
                 k.get("sampled_s", 0), k.get("compile_s", 0)))
    print()
    print("gate cost over the batch (s): " + ", ".join("%s %.2f" % (f[:-2], v) for f, v in sorted(cost.items())))


if __name__ == "__main__":
    main()
