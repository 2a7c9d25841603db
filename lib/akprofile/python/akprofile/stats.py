"""The end-to-end gate's arithmetic, in pure Python (no PyTorch): paired
latency ratios with the worker's confidence interval, output closeness,
the tolerance file, and the verdict.  akprofile.gate measures; this module
decides, and its unit tests pin the rules (docs/apply.md).
"""
import json
import math

VERDICT_REASONS = ("slower", "outputs differ", "no entry applied", "launch failed")

DEFAULT_TOLERANCE = {
    "schema_version": 1,
    # profile-on outputs against profile-off ones, element by element:
    # |on - off| <= atol + rtol * |off|, and non-finite where off is finite fails
    "vs_off": {"atol": 0.1, "rtol": 0.05},
    # against a float32 run of the same program: the profile-on relative RMS
    # error may be at most factor times the profile-off one, plus slack
    "vs_float32": {"factor": 1.25, "slack": 0.002},
    # accepted only when the lower end of the speedup's interval is at least this
    "latency": {"min_speedup": 1.0},
}


class ToleranceError(ValueError):
    pass


def percentile(sorted_x, p):
    """Linear interpolation between closest ranks, as common/stats.c."""
    n = len(sorted_x)
    pos = p * (n - 1)
    lo = int(math.floor(pos))
    if lo >= n - 1:
        return sorted_x[n - 1]
    return sorted_x[lo] + (sorted_x[lo + 1] - sorted_x[lo]) * (pos - lo)


def describe(x):
    """n, median, min, mean, p10, p90 of a sample (zeros when empty)."""
    s = sorted(float(v) for v in x)
    if not s:
        return {"n": 0, "median": 0.0, "min": 0.0, "mean": 0.0, "p10": 0.0, "p90": 0.0}
    return {"n": len(s), "median": percentile(s, 0.5), "min": s[0], "mean": sum(s) / len(s),
            "p10": percentile(s, 0.1), "p90": percentile(s, 0.9)}


def paired_speedup(off, on):
    """(median of off[i] / on[i], half-width of its ~95% interval), as the
    worker computes a kernel's speedup (worker/timing.c s_paired_speedup):
    distribution-free, from the order statistics at n/2 -+ 0.98 sqrt(n) of
    the sorted ratios; pairs with a non-positive time are dropped; one
    ratio's noise is the ratio itself.  (0, 0) when no pair is usable."""
    q = sorted(a / b for a, b in zip(off, on) if a > 0 and b > 0)
    m = len(q)
    if m == 0:
        return 0.0, 0.0
    speedup = q[m // 2] if m & 1 else 0.5 * (q[m // 2 - 1] + q[m // 2])
    half = 0.98 * math.sqrt(m)
    lo = max(0, int(math.floor(m / 2.0 - half)))
    hi = min(m - 1, int(math.ceil(m / 2.0 + half)))
    noise = 0.5 * (q[hi] - q[lo])
    if m < 2:
        noise = speedup
    return speedup, noise


def compare(actual, expected, atol, rtol):
    """Closeness of two equally long sequences of numbers (the reference
    for the tensor version in akprofile.gate): n, violations of
    |a - e| <= atol + rtol |e| (a non-finite a where e is finite, or NaN
    against a number, counts), max_abs (finite pairs), rel_rms
    (sqrt(sum (a-e)^2 / sum e^2) over finite pairs; inf when any pair
    violates finiteness)."""
    if len(actual) != len(expected):
        raise ValueError("compare: %d against %d values" % (len(actual), len(expected)))
    bad = 0
    max_abs = 0.0
    num = den = 0.0
    finite_mismatch = 0
    for a, e in zip(actual, expected):
        a, e = float(a), float(e)
        fa, fe = math.isfinite(a), math.isfinite(e)
        if fa != fe or math.isnan(a) != math.isnan(e):
            bad += 1
            finite_mismatch += 1
            continue
        if not fa:
            if a != e and not (math.isnan(a) and math.isnan(e)):   # +inf against -inf
                bad += 1
                finite_mismatch += 1
            continue
        d = abs(a - e)
        if d > atol + rtol * abs(e):
            bad += 1
        max_abs = max(max_abs, d)
        num += d * d
        den += e * e
    rel = math.inf if finite_mismatch else (math.sqrt(num / den) if den > 0 else (0.0 if num == 0 else math.inf))
    return {"n": len(actual), "violations": bad, "max_abs": max_abs, "rel_rms": rel,
            "finite_mismatch": finite_mismatch}


def _num(doc, key, path, lo=0.0):
    v = doc.get(key)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < lo:
        raise ToleranceError("%s.%s: must be a finite number >= %g" % (path, key, lo))
    return float(v)


def load_tolerance(path=None, text=None):
    """The tolerance document (DEFAULT_TOLERANCE when neither is given),
    validated: unknown fields and bad numbers are refused with the field
    named ("tol.json: vs_off.atol: must be ...")."""
    if path is None and text is None:
        return json.loads(json.dumps(DEFAULT_TOLERANCE))
    name = path or "tolerance"
    try:
        if text is None:
            with open(path) as f:
                text = f.read()
        doc = json.loads(text)
    except (OSError, ValueError) as e:
        raise ToleranceError("%s: %s" % (name, e))
    if not isinstance(doc, dict):
        raise ToleranceError("%s: not a JSON object" % name)
    shape = {"schema_version": None, "vs_off": ("atol", "rtol"), "vs_float32": ("factor", "slack"),
             "latency": ("min_speedup",)}
    for k in doc:
        if k not in shape:
            raise ToleranceError("%s: %s: unknown field (known: %s)" % (name, k, ", ".join(shape)))
    if doc.get("schema_version") != 1:
        raise ToleranceError("%s: schema_version: must be 1" % name)
    out = {"schema_version": 1}
    for sec, fields in shape.items():
        if fields is None:
            continue
        sub = doc.get(sec, DEFAULT_TOLERANCE[sec])
        if not isinstance(sub, dict):
            raise ToleranceError("%s: %s: must be an object" % (name, sec))
        for k in sub:
            if k not in fields:
                raise ToleranceError("%s: %s.%s: unknown field (known: %s)" % (name, sec, k, ", ".join(fields)))
        out[sec] = {}
        for k in fields:
            src = sub if k in sub else DEFAULT_TOLERANCE[sec]
            out[sec][k] = _num(src, k, "%s: %s" % (name, sec), lo=1.0 if k == "factor" else 0.0)
    return out


def decide(tol, speedup, noise, vs_off, err_on_f32, err_off_f32, totals):
    """The verdict: {"verdict": "accepted" | "rejected (r1, r2)", "reasons":
    [...], "checks": {...}}.  Rejected when
      - no call hit the profile ("no entry applied");
      - any compile or launch failed ("launch failed");
      - an output element is beyond vs_off, or the profile-on error against
        float32 exceeds factor x the profile-off one + slack ("outputs differ");
      - speedup - noise < latency.min_speedup ("slower": not faster beyond noise).
    Every check is reported, passed or not."""
    reasons = []
    lat_ok = speedup > 0 and speedup - noise >= tol["latency"]["min_speedup"]
    off_ok = vs_off["violations"] == 0
    f32_limit = tol["vs_float32"]["factor"] * err_off_f32 + tol["vs_float32"]["slack"]
    f32_ok = math.isfinite(err_on_f32) and err_on_f32 <= f32_limit
    applied = totals.get("hits", 0) > 0
    errors = totals.get("errors", 0)
    if not lat_ok:
        reasons.append("slower")
    if not (off_ok and f32_ok):
        reasons.append("outputs differ")
    if not applied:
        reasons.append("no entry applied")
    if errors:
        reasons.append("launch failed")
    checks = {
        "latency": {"ok": lat_ok, "speedup": speedup, "noise": noise, "lower": speedup - noise,
                    "min_speedup": tol["latency"]["min_speedup"]},
        "vs_off": dict(vs_off, ok=off_ok, atol=tol["vs_off"]["atol"], rtol=tol["vs_off"]["rtol"]),
        "vs_float32": {"ok": f32_ok, "rel_rms_on": err_on_f32, "rel_rms_off": err_off_f32, "limit": f32_limit},
        "applied": {"ok": applied, "hits": totals.get("hits", 0), "calls": totals.get("calls", 0)},
        "errors": {"ok": errors == 0, "count": errors},
    }
    verdict = "accepted" if not reasons else "rejected (%s)" % ", ".join(reasons)
    return {"verdict": verdict, "accepted": not reasons, "reasons": reasons, "checks": checks}
