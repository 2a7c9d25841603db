"""What a call routed through akprofile.torch costs, against the call it
replaces (docs/apply.md, "What a routed call costs"; issue 19).

    python3 ops/bench/route_cost.py [--calls N] [--repeats R] [--candidate C] [--json OUT] [--host-profile]

Needs a CUDA GPU, PyTorch and transformers.  Builds a package for this
device with one catalog rmsnorm kernel at M = 1 and M = 512, N = 2048,
bfloat16 (the decoder's RMSNorm at decode and at a 512-token prefill):
--candidate block_row (THREADS=512 VEC=2, what ops/bench/loop_gpu.sh's
tuning chose on the H200, the default) or warp_row (ROWS=4 VEC=2), then,
interleaved R times (default 7):
  host us/call    N calls back to back (one synchronize at the end) of
                  - transformers' LlamaRMSNorm.forward, PyTorch alone;
                  - the same with the profile enabled (every call a hit);
                  - F.rms_norm, PyTorch alone, and routed (hits);
                  - LlamaRMSNorm at M = 3 with the profile enabled: a shape
                    without an entry (the cost of a fallback);
  device us/call  the same N calls captured into one CUDA graph and
                  replayed (CUDA events): kernels only, no host cost.
Prints medians over the repeats and the ratios routed / PyTorch, side by
side from one run (a shared machine: never quote one absolute alone).
--host-profile also runs cProfile over the routed LlamaRMSNorm hit (M = 1)
and fallback (M = 3) calls: where the host time goes.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("AK_SOURCE_DIR") or os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "lib", "akprofile", "python"))
sys.path.insert(0, os.path.join(ROOT, "lib", "akprofile", "python", "tests"))
os.environ.setdefault("AK_SOURCE_DIR", ROOT)
if __name__ == "__main__" and any(a in ("-h", "--help") for a in sys.argv[1:]):
    print(__doc__)                       # before torch: the help needs no GPU host
    sys.exit(0)

import torch                     # noqa: E402
import torch.nn.functional as F  # noqa: E402

import akprofile                 # noqa: E402
import pkg                       # noqa: E402

N = 2048


CANDIDATES = {   # name -> (params, grid(M), block)
    "block_row": ([("THREADS", 512), ("VEC", 2)], lambda m: [m, 1, 1], [512, 1, 1]),
    "warp_row": ([("ROWS", 4), ("VEC", 2)], lambda m: [(m + 3) // 4, 1, 1], [32, 4, 1]),
}


def build_package(out, candidate):
    dev = akprofile.current_device(0)
    params, grid, block = CANDIDATES[candidate]
    entries = []
    for m in (1, 512):
        entries.append(pkg.entry("rmsnorm", ["M", "N"], [m, N], "bfloat16", candidate,
                                 "kernels/rmsnorm/cuda/%s.cu" % candidate, params, grid(m), block,
                                 [("x", m * N), ("w", N)], [("y", m * N)]))
    device = pkg.device_info(dev)
    pkg.build(out, entries=entries, device_class=dev.device_class, name="route-cost", device=device)
    return dev.device_class


def host_us(fn, calls):
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) * 1e6 / calls


def device_us(fn, calls):
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(calls):
            fn()
    g.replay()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    g.replay()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) * 1e3 / calls


def main():
    p = argparse.ArgumentParser(prog="route_cost.py")
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--candidate", choices=sorted(CANDIDATES), default="block_row")
    p.add_argument("--json", default=None)
    p.add_argument("--host-profile", action="store_true",
                   help="also cProfile the routed LlamaRMSNorm hit (M=1) and fallback (M=3) calls: where the host time goes")
    o = p.parse_args()
    if not torch.cuda.is_available():
        sys.exit("route_cost.py: no CUDA device")
    from transformers.models.llama.modeling_llama import LlamaRMSNorm
    import akprofile.torch as akt

    d = tempfile.mkdtemp(prefix="route_cost.")
    cls = build_package(os.path.join(d, "pkg"), o.candidate)
    applied = akt.enable(os.path.join(d, "pkg"), ops=["rms_norm"], print_at_exit=False, active=False)
    dt = torch.bfloat16
    norm = LlamaRMSNorm(N, eps=1e-6).cuda().to(dt)
    with torch.no_grad():
        norm.weight.copy_(1.0 + 0.1 * torch.randn(N, device="cuda"))
    xs = {m: torch.randn(m, N, device="cuda", dtype=dt) for m in (1, 3, 512)}

    def hf(m):
        return lambda: norm(xs[m])

    def frms(m):
        return lambda: F.rms_norm(xs[m], (N,), norm.weight, eps=1e-6)

    cases = []     # (name, fn, routed)
    for m in (1, 512):
        cases += [("LlamaRMSNorm M=%d" % m, hf(m), False), ("LlamaRMSNorm M=%d routed" % m, hf(m), True),
                  ("F.rms_norm M=%d" % m, frms(m), False), ("F.rms_norm M=%d routed" % m, frms(m), True)]
    cases += [("LlamaRMSNorm M=3", hf(3), False), ("LlamaRMSNorm M=3 routed (no entry)", hf(3), True)]

    # correctness first: a routed call that hits must agree with PyTorch's
    with torch.inference_mode():
        for m in (1, 512):
            want = norm(xs[m]).float()
            applied.activate()
            try:
                got = norm(xs[m]).float()
            finally:
                applied.deactivate()
            err = (got - want).abs().max().item()
            if not err < 0.05:
                sys.exit("route_cost.py: routed LlamaRMSNorm M=%d differs from PyTorch's by %g" % (m, err))
        hits = applied.counters.totals()["hits"]
        if hits != 2:
            sys.exit("route_cost.py: %d of 2 checked calls hit the profile (%s)" % (hits, applied.counters.to_json()))

        res = {name: {"host": [], "device": []} for name, _, _ in cases}
        for _ in range(o.repeats):
            for name, fn, routed in cases:
                if routed:
                    applied.activate()
                try:
                    res[name]["host"].append(host_us(fn, o.calls))
                    res[name]["device"].append(device_us(fn, min(o.calls, 500)))
                finally:
                    applied.deactivate()

        if o.host_profile:
            import cProfile
            import io
            import pstats
            for name, fn in (("hit, LlamaRMSNorm M=1", hf(1)), ("fallback, LlamaRMSNorm M=3", hf(3))):
                applied.activate()
                try:
                    prof = cProfile.Profile()
                    prof.enable()
                    for _ in range(o.calls):
                        fn()
                    prof.disable()
                finally:
                    applied.deactivate()
                out = io.StringIO()
                pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(14)
                print("host profile (%s, %d calls; cProfile inflates every Python call alike):" % (name, o.calls))
                print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:4000])

    med = {n: {k: statistics.median(v) for k, v in r.items()} for n, r in res.items()}
    print("route_cost.py on %s (%s), rmsnorm %s, %d calls x %d repeats, medians:"
          % (torch.cuda.get_device_name(0), cls, o.candidate, o.calls, o.repeats))
    print("  %-36s %12s %14s" % ("case", "host us/call", "device us/call"))
    for name, _, _ in cases:
        print("  %-36s %12.2f %14.2f" % (name, med[name]["host"], med[name]["device"]))
    print("  ratios routed / PyTorch alone (host, device):")
    for base in ["LlamaRMSNorm M=1", "LlamaRMSNorm M=512", "F.rms_norm M=1", "F.rms_norm M=512"]:
        r = base + " routed"
        print("  %-36s %12.3f %14.3f" % (r, med[r]["host"] / med[base]["host"],
                                         med[r]["device"] / med[base]["device"]))
    r = "LlamaRMSNorm M=3 routed (no entry)"
    print("  %-36s %12.3f %14.3f" % (r, med[r]["host"] / med["LlamaRMSNorm M=3"]["host"],
                                     med[r]["device"] / med["LlamaRMSNorm M=3"]["device"]))
    if o.json:
        with open(o.json, "w") as f:
            json.dump({"device_class": cls, "candidate": o.candidate, "calls": o.calls, "repeats": o.repeats, "runs": res, "medians": med,
                       "torch": torch.__version__}, f, indent=1, sort_keys=True)


if __name__ == "__main__":
    main()
