"""The end-to-end gate's driver (docs/apply.md):

    python3 -m akprofile.gate --profile DIR [--steps N] [--warmup W]
        [--tolerance-file F] [--ops a,b] [--out GATE.json] [--calls CALLS.json]
        -- script.py [ARGS...]

script.py is imported (as a module, with sys.argv = [script.py, ARGS...])
and must define

    def make_step(dtype):        # torch.float32 or the run's dtype
        ...build the model and its inputs, deterministically (seeded)...
        return step              # step() -> a Tensor, or a tuple/list/dict of them

and may set DTYPE = "bfloat16" | "float16" | "float32" (default bfloat16)
and ENABLE_KWARGS = {...} (more arguments of akprofile.torch.enable, e.g.
{"copy": True}).
Each step() must compute the same thing every time (fresh caches inside).

The protocol:
  1. make_step(float32): one step with the profile off: the float32 outputs;
     then that model is dropped;
  2. make_step(DTYPE); akprofile.torch.enable(DIR, ops) (inactive);
  3. warm-up: W pairs (off, on): compiles and loads the kernels;
  4. outputs: one step off, one on (the counters restart here);
  5. N timed pairs, alternating the order (off on / on off) so that drift
     cancels; each step bracketed by CUDA events on the current stream
     after a synchronize (device time of the whole step);
  6. akprofile.stats: speedup = median of off/on with the worker's ~95%
     interval; closeness of on vs off and of both vs float32; the verdict.
With --cuda-graph, steps 4-5 replay CUDA graphs instead: after the
warm-up, one step is captured with the profile off and one with it on
(torch.cuda.graph; the wrappers run at capture, so the counts are one
step's calls), and the outputs and timed pairs are replays of those two
graphs.  That is how a server that captures its decode steps runs the
model: no Python or launch cost per step, the kernels' device time only.
The step must be capturable (no host synchronization inside; fixed
shapes); the gate says "could not run" otherwise.
Writes the gate JSON (--out, default DIR.gate.json beside the package:
a file inside it would make the package fail its own verification) and
prints one line.  Exit 0 accepted, 1 rejected, 2 the gate could not run.
"""
import argparse
import gc
import hashlib
import importlib.util
import json
import math
import os
import sys
import time

from . import stats

SCHEMA = "akfleet-gate"


def _clean(x):
    """JSON without Infinity/NaN (jansson and most parsers refuse them)."""
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def _flatten(out, torch):
    """step()'s outputs as a list of tensors, in a fixed order."""
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, dict):
        return [t for k in sorted(out) for t in _flatten(out[k], torch)]
    if isinstance(out, (list, tuple)):
        return [t for v in out for t in _flatten(v, torch)]
    if hasattr(out, "to_tuple"):            # transformers' ModelOutput
        return _flatten(out.to_tuple(), torch)
    raise TypeError("step() returned %s: want a Tensor or a tuple/list/dict of them" % type(out).__name__)


def compare_tensors(actual, expected, atol, rtol, torch):
    """stats.compare over lists of tensors, on the device in float64."""
    if len(actual) != len(expected):
        raise ValueError("step() returned %d outputs, then %d" % (len(expected), len(actual)))
    n = bad = mism = 0
    max_abs = num = den = 0.0
    for a, e in zip(actual, expected):
        if tuple(a.shape) != tuple(e.shape):
            raise ValueError("an output of shape %s, then %s" % (tuple(e.shape), tuple(a.shape)))
        a = a.detach().to(torch.float64).flatten()
        e = e.detach().to(torch.float64).flatten()
        fa, fe = torch.isfinite(a), torch.isfinite(e)
        m = (fa != fe) | (torch.isnan(a) != torch.isnan(e)) | (~fa & ~fe & (a != e) & ~torch.isnan(a))
        both = fa & fe
        d = torch.where(both, (a - e).abs(), torch.zeros_like(a))
        over = both & (d > atol + rtol * e.abs())
        n += a.numel()
        mism += int(m.sum())
        bad += int(m.sum()) + int(over.sum())
        if both.any():
            max_abs = max(max_abs, float(d.max()))
        num += float((d * d).sum())
        den += float(torch.where(both, e * e, torch.zeros_like(e)).sum())
    rel = math.inf if mism else (math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf))
    return {"n": n, "violations": bad, "max_abs": max_abs, "rel_rms": rel, "finite_mismatch": mism}


def _file_sha256(path):
    if not path:
        return ""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def package_identity(package):
    """What a recorded gate is tied to: {device_class: updated_ms} of the
    package's profile.json and the SHA-256 of its SHA256SUMS.  The
    coordinator takes a gate only while the installed class record still
    has that updated_ms (docs/apply.md, "Recording the verdict")."""
    with open(os.path.join(package, "profile.json"), "rb") as f:
        prof = json.loads(f.read().decode("utf-8"))
    classes = {}
    for c in prof.get("classes", []):
        if isinstance(c, dict) and isinstance(c.get("device_class"), str) and isinstance(c.get("updated_ms"), int):
            classes[c["device_class"]] = c["updated_ms"]
    return classes, _file_sha256(os.path.join(package, "SHA256SUMS"))


def _load_script(path, args):
    sys.argv = [path] + list(args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec = importlib.util.spec_from_file_location("akgate_script", path)
    if spec is None:
        raise ImportError("%s: not a Python file" % path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    if not callable(getattr(mod, "make_step", None)):
        raise ImportError("%s defines no make_step(dtype) (docs/apply.md)" % path)
    return mod


def _timed(step, torch):
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    step()
    e.record()
    e.synchronize()
    return s.elapsed_time(e)


def _capture(run_one, on, torch):
    """One step captured into a CUDA graph with the profile on or off:
    (graph, the step's outputs, which each replay rewrites)."""
    g = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(g):
            out = run_one(on)
    except Exception as e:
        raise RuntimeError("--cuda-graph: the step (profile %s) could not be captured: %s"
                           % ("on" if on else "off", e)) from e
    return g, out


def _replay(graph):
    graph[0].replay()
    return graph[1]


def run(opts):
    import torch
    import akprofile.torch as akt
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: the gate times device steps")
    tol = stats.load_tolerance(opts.tolerance_file)
    package_classes, package_sha256 = package_identity(opts.profile)
    tol_text = json.dumps(tol, sort_keys=True)
    mod = _load_script(opts.script, opts.args)
    dtype_name = getattr(mod, "DTYPE", "bfloat16")
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}.get(dtype_name)
    if dtype is None:
        raise ValueError("%s: DTYPE %r is not bfloat16, float16 or float32" % (opts.script, dtype_name))
    ops = opts.ops.split(",") if opts.ops else None
    t0 = time.time()
    with torch.inference_mode():
        step32 = mod.make_step(torch.float32)
        out32 = [t.detach().to(torch.float32).clone() for t in _flatten(step32(), torch)]
        torch.cuda.synchronize()
        del step32
        gc.collect()
        torch.cuda.empty_cache()

        step = mod.make_step(dtype)
        extra = dict(getattr(mod, "ENABLE_KWARGS", {}) or {})
        applied = akt.enable(opts.profile, ops=ops, print_at_exit=False, active=False, **extra)

        def run_one(on):
            (applied.activate if on else applied.deactivate)()
            try:
                return step()
            finally:
                applied.deactivate()

        for _ in range(opts.warmup):
            run_one(False)
            run_one(True)
        torch.cuda.synchronize()
        applied.counters.reset()
        if opts.cuda_graph:
            graphs = {on: _capture(run_one, on, torch) for on in (False, True)}
            out_off = [t.detach().clone() for t in _flatten(_replay(graphs[False]), torch)]
            out_on = [t.detach().clone() for t in _flatten(_replay(graphs[True]), torch)]
        else:
            out_off = [t.detach().clone() for t in _flatten(run_one(False), torch)]
            out_on = [t.detach().clone() for t in _flatten(run_one(True), torch)]
        torch.cuda.synchronize()

        t_off, t_on = [], []
        for i in range(opts.steps):
            order = (False, True) if i % 2 == 0 else (True, False)
            for on in order:
                if opts.cuda_graph:
                    ms = _timed(graphs[on][0].replay, torch)
                else:
                    (applied.activate if on else applied.deactivate)()
                    try:
                        ms = _timed(step, torch)
                    finally:
                        applied.deactivate()
                (t_on if on else t_off).append(ms)

        vs_off = compare_tensors(out_on, out_off, tol["vs_off"]["atol"], tol["vs_off"]["rtol"], torch)
        on32 = compare_tensors(out_on, out32, 0.0, 0.0, torch)
        off32 = compare_tensors(out_off, out32, 0.0, 0.0, torch)
    speedup, noise = stats.paired_speedup(t_off, t_on)
    totals = applied.counters.totals()
    verdict = stats.decide(tol, speedup, noise, vs_off, on32["rel_rms"], off32["rel_rms"], totals)
    calls = applied.to_json()
    steps_counted = 1 if opts.cuda_graph else opts.steps + 1    # a graph's calls are its capture's
    doc = {
        "format": SCHEMA, "schema_version": 1,
        "profile": applied.runtime.profile.name, "package": os.path.abspath(opts.profile),
        "package_classes": package_classes, "package_sha256": package_sha256,
        "device_class": applied.runtime.device_class, "applies": applied.runtime.applies,
        "why_not": applied.runtime.why_not,
        "script": os.path.abspath(opts.script), "args": list(opts.args), "dtype": dtype_name,
        "ops": sorted(ops) if ops else "all", "ops_routed": sorted(applied.ops),
        "ops_unrouted": [{"op": o, "reason": r} for o, r in sorted(applied.unrouted.items())],
        "enable_kwargs": extra,
        "steps": opts.steps, "warmup": opts.warmup, "mode": "cuda_graph" if opts.cuda_graph else "eager",
        "tolerance": tol, "tolerance_file": opts.tolerance_file or "(built-in defaults)",
        "tolerance_sha256": hashlib.sha256(tol_text.encode()).hexdigest(),     # of the values in force
        "tolerance_file_sha256": _file_sha256(opts.tolerance_file),          # of the file's bytes
        "latency_ms": {"off": stats.describe(t_off), "on": stats.describe(t_on), "pairs": [[a, b] for a, b in
                                                                                          zip(t_off, t_on)]},
        "speedup": speedup, "speedup_noise": noise,
        "hit_share": totals["hits"] / totals["calls"] if totals["calls"] else 0.0,
        "calls_per_step": totals["calls"] / steps_counted,
        "outputs": {"vs_off": vs_off, "on_vs_float32": on32, "off_vs_float32": off32},
        "calls": calls,
        "wall_s": time.time() - t0,
    }
    doc.update(verdict)
    return doc


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m akprofile.gate", description=__doc__.split("\n\n")[0])
    p.add_argument("--profile", required=True, help="the exported package folder")
    p.add_argument("--steps", type=int, default=20, help="timed pairs (at least 10; default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed pairs first (default 3)")
    p.add_argument("--tolerance-file", default=None, help="the frozen tolerance JSON (default: built-in)")
    p.add_argument("--ops", default=None, help="comma-separated operators to route (default: all)")
    p.add_argument("--out", default=None, help="the gate JSON (default: PROFILE_DIR.gate.json)")
    p.add_argument("--calls", default=None, help="also write the per-call counts JSON here")
    p.add_argument("--cuda-graph", action="store_true",
                   help="time replays of a step captured into a CUDA graph, off and on (device time only)")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    opts = p.parse_args(argv)
    if opts.steps < 10:
        p.error("--steps must be at least 10 (paired steps for the interval)")
    if opts.warmup < 1:
        p.error("--warmup must be at least 1 (the kernels compile there)")
    out = opts.out or os.path.normpath(os.path.abspath(opts.profile)) + ".gate.json"
    try:
        doc = run(opts)
    except Exception as e:
        import traceback
        traceback.print_exc()
        print("akprofile.gate: error: %s" % e, file=sys.stderr)
        return 2
    with open(out + ".tmp", "w") as f:
        json.dump(_clean(doc), f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(out + ".tmp", out)
    if opts.calls:
        with open(opts.calls, "w") as f:
            json.dump(_clean(doc["calls"]), f, indent=1, sort_keys=True)
            f.write("\n")
    print("gate: %s: speedup %.3fx +- %.3f (%d %spairs), %.0f%% of %d calls/step hit the profile, "
          "max |on-off| %.3g, rel RMS vs float32 %.3g (off %.3g) -> %s"
          % (doc["profile"], doc["speedup"], doc["speedup_noise"], opts.steps,
             "CUDA-graph " if opts.cuda_graph else "", 100 * doc["hit_share"],
             doc["calls_per_step"], doc["outputs"]["vs_off"]["max_abs"], doc["outputs"]["on_vs_float32"]["rel_rms"],
             doc["outputs"]["off_vs_float32"]["rel_rms"], doc["verdict"]))
    print("gate: written %s" % out)
    return 0 if doc["accepted"] else 1


if __name__ == "__main__":
    sys.exit(main())
