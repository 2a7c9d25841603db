#!/usr/bin/env python3
"""ops/bench/torch_compare.py: the nightly batch's winners next to PyTorch.

Reads what akctl printed for a finished batch (`report --json`, `receipts
--json`), and for every operator, workload and dtype of the batch

  * takes the winner's receipt (the baseline's preflight receipt when the
    baseline was kept), or for a workload with a workload pick (promote.h:
    another candidate installed for that workload alone) the pick's
    receipt (where the winner did not beat the baseline at a workload by
    the threshold and its noise and no pick did, the profile keeps the
    baseline there, docs/profiles.md, and so does this table), each with
    its median time, the baseline's median time, the speedup, the
    workload's FLOP and byte counts from the spec's expressions;
  * times PyTorch doing the same operation on the same shapes and dtype, in
    this process, with the method the worker uses (docs/measurement.md):
    before every sample the L2 is flushed by reading a buffer of twice its
    size, a spin kernel (torch.cuda._sleep) is queued so that the launch is
    not on the clock, and the sample is the time between two CUDA events
    around the call, minus the event floor (the same pair around an empty
    kernel, minus that kernel's own duration by the profiler: about 0.5 us
    on an H200, so the subtraction is conservative by that much) where the
    receipt's own figures are without it (its timer "cupti" or
    "events-floor"), and not where they hold it (timer "events": a vendor
    library baseline, which CUPTI cannot time, and the candidate timed
    against it; subtracting the floor from PyTorch alone there made
    PyTorch about 3 us faster than ours at the same speed on an H100);
  * measures in the same run the device's copy bandwidth (read + write of a
    1 GiB copy) and bf16 matmul peak (8192^3 through torch.matmul, cuBLAS),
    the yardsticks of the "% of" columns.

Prints a Markdown table (and writes it to --out): per operator and size the
winner and its config, speedup over the baseline, achieved GB/s as % of the
copy bandwidth (memory-bound operators) or TFLOP/s as % of the bf16 matmul
peak (compute-bound ones), PyTorch's time and ours / PyTorch's.

    python3 torch_compare.py --report report.json --receipts receipts.json \
        --specs kernels --out compare.md
"""
import argparse
import json
import math
import os
import statistics
import sys

COMPUTE_BOUND = {"matmul", "fused_mlp", "flash_attention"}
# split_kv_attention (decode: a few query rows per KV head) and rotate_qk are
# memory-bound: % of the copy bandwidth.


def load_json(path):
    with open(path) as f:
        return json.load(f)


def dims_by_key(spec, dims):
    return {k: int(v) for k, v in zip(spec["keys"], dims)}


# ----------------------------------------------------------------- PyTorch ops
# Each builder gets (torch, d, dtype, dev) and returns a zero-argument callable
# doing what a PyTorch user would write for the operation, on inputs laid out
# the way the kernels' specs lay them out (row-major, the spec's key order).
def _softmax(t, d, dt, dev):
    x = t.randn(d["rows"], d["cols"], dtype=dt, device=dev)
    return lambda: t.softmax(x, dim=-1)


def _rmsnorm(t, d, dt, dev):
    x = t.randn(d["M"], d["N"], dtype=dt, device=dev)
    w = t.randn(d["N"], dtype=dt, device=dev)
    f = getattr(t.nn.functional, "rms_norm", None)
    if f is not None:
        return lambda: f(x, (d["N"],), w, 1e-6)
    return lambda: x * t.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(dt) * w


def _layernorm(t, d, dt, dev):
    x = t.randn(d["batch"], d["dim"], dtype=dt, device=dev)
    g = t.randn(d["dim"], dtype=dt, device=dev)
    b = t.randn(d["dim"], dtype=dt, device=dev)
    return lambda: t.nn.functional.layer_norm(x, (d["dim"],), g, b, 1e-5)


def _reduce(t, d, dt, dev):
    x = t.randn(d["M"], d["N"], dtype=dt, device=dev)
    return lambda: x.sum(dim=-1)


def _cross_entropy(t, d, dt, dev):
    x = t.randn(d["batch"], d["vocab"], dtype=dt, device=dev)
    y = t.randint(0, d["vocab"], (d["batch"],), device=dev)
    return lambda: t.nn.functional.cross_entropy(x, y, reduction="none")


def _rotary(t, d, dt, dev):
    B, H, S, D = d["B"], d["H"], d["S"], d["D"]
    x = t.randn(B, H, S, D, dtype=dt, device=dev)
    inv = 1.0 / (10000 ** (t.arange(0, D, 2, device=dev).float() / D))
    ang = t.outer(t.arange(S, device=dev).float(), inv)
    cos = t.cat((ang.cos(), ang.cos()), -1).to(dt)
    sin = t.cat((ang.sin(), ang.sin()), -1).to(dt)

    def f():
        x1, x2 = x[..., : D // 2], x[..., D // 2:]
        return x * cos + t.cat((-x2, x1), -1) * sin
    return f


def _matmul(t, d, dt, dev):
    a = t.randn(d["M"], d["K"], dtype=dt, device=dev)
    b = t.randn(d["K"], d["N"], dtype=dt, device=dev)
    return lambda: a @ b


def _fused_mlp(t, d, dt, dev):
    x = t.randn(d["batch"], d["dim"], dtype=dt, device=dev)
    wg = t.randn(d["dim"], d["hidden"], dtype=dt, device=dev) / math.sqrt(d["dim"])
    wu = t.randn(d["dim"], d["hidden"], dtype=dt, device=dev) / math.sqrt(d["dim"])
    wd = t.randn(d["hidden"], d["dim"], dtype=dt, device=dev) / math.sqrt(d["hidden"])
    return lambda: (t.nn.functional.silu(x @ wg) * (x @ wu)) @ wd


def _attention(t, d, dt, dev):
    B, H, S, D = d["B"], d["H"], d["S"], d["D"]
    q, k, v = (t.randn(B, H, S, D, dtype=dt, device=dev) for _ in range(3))
    causal = d.get("mask", 1) == 2                       # the spec's mask key: 1 none, 2 causal
    sdpa = t.nn.functional.scaled_dot_product_attention
    return lambda: sdpa(q, k, v, is_causal=causal)


def _rotate_qk(t, d, dt, dev):
    """HF-style eager RoPE of q and k at per-token positions (a cos/sin
    gather from the positions, then the rotation), layout 1 half split,
    2 interleaved."""
    B, S, HQ, HK, D = d["B"], d["S"], d["HQ"], d["HK"], d["D"]
    q = t.randn(B, S, HQ, D, dtype=dt, device=dev)
    k = t.randn(B, S, HK, D, dtype=dt, device=dev)
    pos = t.randint(0, 32768, (B, S), device=dev)
    inv = 1.0 / (float(d["theta"]) ** (t.arange(0, D - D % 2, 2, device=dev).float() / D))
    half = D // 2

    def rot(x, c, s):
        if d["layout"] == 2:
            x1, x2 = x[..., 0:2 * half:2], x[..., 1:2 * half:2]
            return t.stack((x1 * c - x2 * s, x2 * c + x1 * s), -1).flatten(-2)
        x1, x2 = x[..., :half], x[..., half:2 * half]
        return t.cat((x1 * c - x2 * s, x2 * c + x1 * s), -1)

    def f():
        ang = pos.float()[..., None] * inv                  # [B, S, D/2]
        c, s = ang.cos().to(dt)[:, :, None], ang.sin().to(dt)[:, :, None]
        return rot(q, c, s), rot(k, c, s)
    return f


def _split_kv_mask(t, d, dev):
    """The spec's mask (kernels/split_kv_attention/ref.c) as a boolean
    [B, 1, Q, L] (True: attend), None for mask 1."""
    B, Q, L, mask = d["B"], d["Q"], d["L"], d["mask"]
    if mask not in (2, 3):
        return None
    b = t.arange(B, device=dev, dtype=t.int64)
    if mask == 3:
        lens = L - ((b * 2654435761) % (1 << 32)) % (L + 1)
    else:
        lens = t.full((B,), L, device=dev, dtype=t.int64)
    n = lens[:, None] - Q + 1 + t.arange(Q, device=dev)[None, :]     # [B, Q] keys each query sees
    return (t.arange(L, device=dev)[None, None, :] < n[:, :, None])[:, None]


def _split_kv_inputs(t, d, dt, dev):
    B, Q, HQ, HK, L, D = d["B"], d["Q"], d["HQ"], d["HK"], d["L"], d["D"]
    q = t.randn(B, HQ, Q, D, dtype=dt, device=dev)
    k = t.randn(B, HK, L, D, dtype=dt, device=dev)
    v = t.randn(B, HK, L, D, dtype=dt, device=dev)
    return q, k, v, _split_kv_mask(t, d, dev)


def _split_kv_eager(t, d, dt, dev):
    """What an eager decoder layer does (HF's eager attention): KV heads
    repeated to the query heads, scores, mask, softmax in float32, P V."""
    q, k, v, m = _split_kv_inputs(t, d, dt, dev)
    g = d["HQ"] // d["HK"]
    scale = 1.0 / math.sqrt(d["D"])

    def f():
        kk, vv = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        s = (q @ kk.transpose(-1, -2)) * scale
        if m is not None:
            s = s.masked_fill(~m, float("-inf"))
        return t.softmax(s.float(), dim=-1).to(dt) @ vv
    return f


def _split_kv_sdpa(t, d, dt, dev):
    """torch scaled_dot_product_attention on the same call (enable_gqa where
    this torch has it, else the KV heads repeated outside the clock)."""
    q, k, v, m = _split_kv_inputs(t, d, dt, dev)
    sdpa = t.nn.functional.scaled_dot_product_attention
    try:
        sdpa(q[:, :, :1], k[:, :, :1], v[:, :, :1], enable_gqa=True)
        return lambda: sdpa(q, k, v, attn_mask=m, enable_gqa=True)
    except TypeError:
        g = d["HQ"] // d["HK"]
        kk, vv = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
        return lambda: sdpa(q, kk, vv, attn_mask=m)


BUILDERS = {
    "softmax": _softmax, "rmsnorm": _rmsnorm, "layernorm": _layernorm, "reduce": _reduce,
    "cross_entropy": _cross_entropy, "rotary_embedding": _rotary, "matmul": _matmul,
    "fused_mlp": _fused_mlp, "flash_attention": _attention,
    "rotate_qk": _rotate_qk, "split_kv_attention": _split_kv_eager,
}
# More PyTorch implementations of an operation, timed beside BUILDERS' (the
# PyTorch column then shows each; PyTorch/ours is against the fastest).
ALT_BUILDERS = {
    "split_kv_attention": [("sdpa", _split_kv_sdpa)],
}


# The fused operators of VLA / LLM serving, as their models write them in eager
# PyTorch (openpi's pi0.5, vLLM's reference forward_native).
def _gated_residual(t, d, dt, dev):
    B, T, N = d["B"], d["T"], d["N"]
    x = t.randn(B, T, N, dtype=dt, device=dev)
    h = t.randn(B, T, N, dtype=dt, device=dev)
    gate = t.randn(B, 1 if d["G"] == 1 else T, N, dtype=dt, device=dev)   # G 1: per batch row
    return lambda: x + h * gate


def _ada_rms_norm(t, d, dt, dev):
    B, T, N = d["B"], d["T"], d["N"]
    x = t.randn(B, T, N, dtype=dt, device=dev)
    scale = t.randn(B, 1, N, dtype=dt, device=dev) * 0.1
    shift = t.randn(B, 1, N, dtype=dt, device=dev) * 0.1
    f = getattr(t.nn.functional, "rms_norm", None)
    if f is not None:
        return lambda: f(x, (N,), None, 1e-6) * (1 + scale) + shift

    def g():
        xf = x.float()
        return (xf * t.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(dt) * (1 + scale) + shift
    return g


def _gated_gelu(t, d, dt, dev):
    M, N = d["M"], d["N"]
    x = t.randn(M, 2 * N, dtype=dt, device=dev)
    if d["act"] == 1:
        return lambda: t.nn.functional.gelu(x[:, :N], approximate="tanh") * x[:, N:]
    return lambda: t.nn.functional.silu(x[:, :N]) * x[:, N:]


BUILDERS.update({"gated_residual": _gated_residual, "ada_rms_norm": _ada_rms_norm,
                 "gated_gelu": _gated_gelu})


class Timer:
    """Cold-L2, launch-hidden event timing, as the worker does it."""

    def __init__(self, t, dev):
        self.t = t
        props = t.cuda.get_device_properties(dev)
        l2 = getattr(props, "L2_cache_size", 64 << 20) or (64 << 20)
        self.flush = t.empty(2 * l2 // 4, dtype=t.float32, device=dev)
        self.sink = t.empty((), dtype=t.float32, device=dev)
        self.floor_us = 0.0
        self.floor_us = self.median_us(lambda: t.cuda._sleep(0), n=50, raw=True)

    def sample(self, fn):
        t = self.t
        t.sum(self.flush, dim=0, out=self.sink)          # read 2x L2: cold caches
        t.cuda._sleep(200000)                            # launch queued behind it
        s, e = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) * 1000.0

    @staticmethod
    def raw_for(timer_name):
        """Whether a receipt figure of clock timer_name holds the event
        floor (docs/measurement.md, "timer"): PyTorch is then timed raw
        too, so both sides carry it."""
        return timer_name == "events"

    def median_us(self, fn, n=30, raw=False, max_s=2.0):
        import time
        for _ in range(3):
            fn()
        self.t.cuda.synchronize()
        xs, t0 = [], time.monotonic()
        while len(xs) < n and (len(xs) < 5 or time.monotonic() - t0 < max_s):
            xs.append(self.sample(fn))
        m = statistics.median(xs)
        return m if raw else max(m - self.floor_us, 0.0)


def yardsticks(t, dev, timer):
    n = 1 << 28                                          # 1 GiB of float32
    a = t.empty(n, dtype=t.float32, device=dev)
    b = t.empty_like(a)
    copy_us = timer.median_us(lambda: b.copy_(a), n=20)
    copy_gbs = 2 * n * 4 / copy_us / 1e3
    m = 8192
    x = t.randn(m, m, dtype=t.bfloat16, device=dev)
    y = t.randn(m, m, dtype=t.bfloat16, device=dev)
    mm_us = timer.median_us(lambda: x @ y, n=20)
    bf16_tflops = 2 * m ** 3 / mm_us / 1e6
    del a, b, x, y
    return copy_gbs, bf16_tflops


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--report", required=True)
    ap.add_argument("--receipts", required=True)
    ap.add_argument("--specs", default="kernels", help="catalog dir with <op>/spec.json")
    ap.add_argument("--extra-spec", action="append", default=[], help="spec.json of an external op")
    ap.add_argument("--out", default=None)
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--threshold", type=float, default=0.03,
                    help="the batch's policy.threshold (an entry needs speedup >= 1 + threshold + noise)")
    args = ap.parse_args()

    report = load_json(args.report)
    receipts = {r["task_id"]: r for r in load_json(args.receipts)["receipts"]
                if r.get("status") == "ok"}
    specs = {}
    for op in report["ops"]:
        p = os.path.join(args.specs, op["op"], "spec.json")
        if os.path.exists(p):
            specs[op["op"]] = load_json(p)
    for p in args.extra_spec:
        s = load_json(p)
        specs[s["name"]] = s

    import torch as t
    dev = "cuda"
    timer = Timer(t, dev)
    copy_gbs, bf16_tflops = yardsticks(t, dev, timer)
    tdt = {"float32": t.float32, "float16": t.float16, "bfloat16": t.bfloat16}

    rows, out = [], []
    for op in report["ops"]:
        name, w = op["op"], op.get("winner")
        if not w:
            continue
        task = w["task_id"] if w.get("promoted") else op["preflight"]["task_id"]
        r = receipts.get(task)
        if not r:
            rows.append({"op": name, "error": "no ok receipt for %s" % task})
            continue
        def label(c):
            return c["candidate_name"] + " " + " ".join("%s=%d" % (p["name"], p["value"])
                                                        for p in c.get("params", []))
        config = "baseline" if not w.get("promoted") else label(w)
        picks = {(pk["workload"], pk["dtype"]): pk for pk in w.get("picks", [])}
        for tm in r["timings"]:
            wl = tm["workload"]
            pk = picks.get((wl["name"], wl["dtype"]))
            if pk and pk.get("confirmation") == "disagrees":
                pk = None                   # refuted: install skips it (docs/profiles.md)
            if pk and receipts.get(pk["task_id"]):
                # the pick's own measurement of this workload
                tm = next((x for x in receipts[pk["task_id"]]["timings"]
                           if x["workload"]["name"] == wl["name"] and x["workload"]["dtype"] == wl["dtype"]), tm)
            row_config = (label(pk) + " (pick)") if pk else config
            ours = tm["candidate"]["median_us"]
            base = tm["baseline"]["median_us"] if tm.get("baseline") else ours
            s_wl = tm.get("speedup") or (base / ours if ours > 0 else 0.0)
            if w.get("promoted") and not pk and s_wl < 1 + args.threshold + tm.get("speedup_noise", 0.0):
                # install leaves the winner out here: the baseline runs
                row_config = "baseline (%s: %.2fx here)" % (config, s_wl)
                ours = base
            row = {"op": name, "workload": wl["name"], "dims": wl["dims"], "dtype": wl["dtype"],
                   "config": row_config, "ours_us": ours, "baseline_us": base,
                   "speedup": base / ours if ours > 0 else 0.0, "timer": tm.get("timer", ""),
                   "flops": tm.get("flops", 0.0), "bytes": tm.get("bytes", 0.0)}
            if name in COMPUTE_BOUND:
                row["achieved"] = row["flops"] / ours / 1e6
                row["pct"] = 100.0 * row["achieved"] / bf16_tflops
            else:
                row["achieved"] = row["bytes"] / ours / 1e3
                row["pct"] = 100.0 * row["achieved"] / copy_gbs
            b = BUILDERS.get(name)
            if b and name in specs:
                try:
                    fn = b(t, dims_by_key(specs[name], wl["dims"]), tdt[wl["dtype"]], dev)
                    row["torch_us"] = timer.median_us(fn, raw=Timer.raw_for(row["timer"]))
                    row["vs_torch"] = row["torch_us"] / ours if ours > 0 else 0.0
                    del fn
                except Exception as e:                       # noqa: BLE001 - reported
                    row["torch_error"] = str(e).split("\n")[0][:80]
                for alt, ab in ALT_BUILDERS.get(name, []):
                    try:
                        fn = ab(t, dims_by_key(specs[name], wl["dims"]), tdt[wl["dtype"]], dev)
                        row.setdefault("torch_alt_us", {})[alt] = timer.median_us(
                            fn, raw=Timer.raw_for(row["timer"]))
                        del fn
                    except Exception as e:                   # noqa: BLE001 - reported
                        row.setdefault("torch_alt_error", {})[alt] = str(e).split("\n")[0][:80]
                best = min(([row["torch_us"]] if "torch_us" in row else [])
                           + list(row.get("torch_alt_us", {}).values()), default=None)
                if best is not None and ours > 0:
                    row["vs_torch"] = best / ours
            t.cuda.empty_cache()
            rows.append(row)

    out.append("Yardsticks measured in this run: copy bandwidth %.0f GB/s (read+write, 1 GiB), "
               "bf16 matmul %.1f TFLOP/s (8192^3, torch.matmul); event floor %.2f us, subtracted from "
               "PyTorch's times except in rows whose receipt timed with raw events (timer \"events\": %s), "
               "whose figures hold it too.\n"
               % (copy_gbs, bf16_tflops, timer.floor_us,
                  ", ".join(sorted(set("%s/%s" % (r["op"], r["workload"]) for r in rows
                                       if "error" not in r and Timer.raw_for(r["timer"])))) or "none"))
    out.append("| op | workload | dims | dtype | installed config | ours us | baseline us | speedup "
               "| achieved | % of yardstick | PyTorch us | PyTorch/ours |")
    out.append("|---|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        if "error" in r:
            out.append("| %s | %s |" % (r["op"], r["error"]))
            continue
        unit = "TFLOP/s" if r["op"] in COMPUTE_BOUND else "GB/s"
        torch_col = ("%.2f" % r["torch_us"]) if "torch_us" in r else r.get("torch_error", "n/a")
        for alt, us in r.get("torch_alt_us", {}).items():
            torch_col += " (%s %.2f)" % (alt, us)
        for alt, err in r.get("torch_alt_error", {}).items():
            torch_col += " (%s: %s)" % (alt, err)
        ratio = ("%.2f" % r["vs_torch"]) if "vs_torch" in r else "-"
        out.append("| %s | %s | %s | %s | %s | %.2f | %.2f | %.2fx | %.1f %s | %.0f%% | %s | %s |" % (
            r["op"], r["workload"], "x".join(str(x) for x in r["dims"]), r["dtype"], r["config"],
            r["ours_us"], r["baseline_us"], r["speedup"], r["achieved"], unit, r["pct"],
            torch_col, ratio))
    text = "\n".join(out) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"copy_gbs": copy_gbs, "bf16_tflops": bf16_tflops,
                       "floor_us": timer.floor_us, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
