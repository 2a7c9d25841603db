#!/usr/bin/env python3
"""ops/discover/launch_cost.py: the host cost of one kernel launch, as a
program sees it: STEPS steps of LAUNCHES launches each of a one-element
in-place add (the smallest kernel PyTorch launches), every step inside an
NVTX range "step" and ending in a synchronise.  Prints one JSON line per
measured step: {"step": i, "launches": n, "wall_us": per launch,
"cpu_us": per launch (the main thread's CPU time)}.

Run bare and under `akctl discover` (ops/bench/launch_cost.sh does both,
interleaved) to see what the injection adds to each launch: a count of
work per launch, where a model's step time mixes it with everything else
the host does.

    python3 ops/discover/launch_cost.py [--steps 30] [--launches 2000] [--warmup 5]
"""
import argparse
import json
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--launches", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=5, help="steps not printed (the first ones)")
    a = ap.parse_args()
    if a.steps < 1 or a.launches < 1 or a.warmup < 0:
        ap.error("--steps and --launches must be >= 1, --warmup >= 0")
    import torch
    if not torch.cuda.is_available():
        ap.error("needs a CUDA device")
    x = torch.zeros(1, device="cuda", dtype=torch.float64)   # exact counts up to 2^53
    torch.cuda.synchronize()
    for i in range(a.warmup + a.steps):
        torch.cuda.nvtx.range_push("step")
        w0, c0 = time.perf_counter(), time.thread_time()
        for _ in range(a.launches):
            x.add_(1.0)
        c1 = time.thread_time()
        torch.cuda.synchronize()
        w1 = time.perf_counter()
        torch.cuda.nvtx.range_pop()
        if i >= a.warmup:
            print(json.dumps({"step": i - a.warmup, "launches": a.launches,
                              "wall_us": (w1 - w0) * 1e6 / a.launches,
                              "cpu_us": (c1 - c0) * 1e6 / a.launches}), flush=True)
    if x.item() != float((a.warmup + a.steps) * a.launches):
        raise SystemExit("launch_cost: the adds did not all run")


if __name__ == "__main__":
    main()
