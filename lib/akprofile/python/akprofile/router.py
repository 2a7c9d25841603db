"""Routing one call to the profile or to the program's own implementation,
and counting what happened.  No PyTorch here: akprofile.torch supplies the
two callables per call, so the rule and the counters are tested on a CPU.

The rule, per call (op, dims in the operator's key order, dtype):
  1. a reason found before any lookup (layout, arguments the kernel does not
     implement, autograd ...) -> fallback with that reason;
  2. the runtime's lookup (libakprofile's exact match) -> fallback with the
     library's reason when nothing applies;
  3. an entry that failed to compile or launch before -> fallback, "broken";
  4. launch(kernel); a CompileError or LaunchError marks the entry broken
     (named in the report with the error) and this call falls back; a Skip
     raised by launch before anything ran is a plain fallback with its
     reason (a buffer size that does not fit, a graph capture ...).
Lookups are memoised per (op, dims, dtype): the profile is read-only.
"""
import json
import sys
import threading

from .nvrtc import CompileError
from .cuda import LaunchError


class Skip(Exception):
    """Raised by a launch callable that decided not to launch: a fallback
    with this reason, not the entry's fault."""


def shape_text(dims):
    return "x".join(str(int(d)) for d in dims)


class Counters:
    """Per operator and shape: hits, fallbacks by reason, errors by entry."""

    def __init__(self):
        self._lock = threading.Lock()
        self.rows = {}                 # (op, dims tuple, dtype) -> {"hits": n, "fallbacks": {reason: n}, "errors": {..}}

    def _row(self, op, dims, dtype):
        key = (op, tuple(dims), dtype)       # the text is made for the report, not per call
        row = self.rows.get(key)
        if row is None:
            row = self.rows[key] = {"hits": 0, "fallbacks": {}, "errors": {}}
        return row

    def hit(self, op, dims, dtype):
        with self._lock:
            self._row(op, dims, dtype)["hits"] += 1

    def fallback(self, op, dims, dtype, reason, error=False):
        with self._lock:
            row = self._row(op, dims, dtype)
            row["fallbacks"][reason] = row["fallbacks"].get(reason, 0) + 1
            if error:
                row["errors"][reason] = row["errors"].get(reason, 0) + 1

    def _sorted(self):
        with self._lock:
            rows = list(self.rows.items())
        return sorted((((op, shape_text(dims), dtype), r) for (op, dims, dtype), r in rows), key=lambda kr: kr[0])

    def totals(self):
        hits = sum(r["hits"] for r in self.rows.values())
        fb = sum(sum(r["fallbacks"].values()) for r in self.rows.values())
        errors = sum(sum(r["errors"].values()) for r in self.rows.values())
        return {"calls": hits + fb, "hits": hits, "fallbacks": fb, "errors": errors}

    def reset(self):
        with self._lock:
            self.rows = {}

    def to_json(self):
        ops = []
        for (op, shape, dtype), r in self._sorted():
            ops.append({"op": op, "shape": shape, "dtype": dtype, "hits": r["hits"],
                        "fallbacks": sum(r["fallbacks"].values()),
                        "reasons": [{"reason": k, "count": v} for k, v in sorted(r["fallbacks"].items())],
                        "errors": [{"error": k, "count": v} for k, v in sorted(r["errors"].items())]})
        return {"totals": self.totals(), "calls": ops}

    def report(self, out=None, title="akprofile"):
        """The table printed at exit: one line per operator, shape and dtype."""
        out = out or sys.stderr
        t = self.totals()
        share = 100.0 * t["hits"] / t["calls"] if t["calls"] else 0.0
        print("%s: %d calls, %d hit the profile (%.1f%%), %d fell back, %d errors"
              % (title, t["calls"], t["hits"], share, t["fallbacks"], t["errors"]), file=out)
        for (op, shape, dtype), r in self._sorted():
            fb = sum(r["fallbacks"].values())
            print("  %-28s %-20s %-9s hits %-7d fallbacks %d" % (op, shape, dtype, r["hits"], fb), file=out)
            for reason, n in sorted(r["fallbacks"].items(), key=lambda kv: -kv[1]):
                print("      %6d x %s" % (n, reason), file=out)

    def write_json(self, path, extra=None):
        doc = dict(extra or {})
        doc.update(self.to_json())
        with open(path, "w") as f:
            json.dump(doc, f, indent=1, sort_keys=True)
            f.write("\n")


class Router:
    """Decides and counts; see the module's rule."""

    def __init__(self, runtime, counters=None):
        self.runtime = runtime
        self.counters = counters or Counters()
        self.broken = {}               # kernel identity -> "compile_error: ..." / "launch_error: ..."
        self._lookups = {}
        self._lock = threading.Lock()

    def lookup(self, op, dims, dtype):
        fast = (op, tuple(dims), dtype)       # the memo's key as the call gives it
        got = self._lookups.get(fast)
        if got is None:
            key = (op, tuple(int(d) for d in dims), dtype)
            got = self._lookups.get(key)
            if got is None:
                got = self.runtime.lookup(op, key[1], dtype)
            with self._lock:
                self._lookups[key] = got
                self._lookups[fast] = got
        return got

    def dispatch(self, op, dims, dtype, launch, fallback, reason=None):
        """launch(kernel) when an entry applies (its result is returned),
        else fallback(); counts either way."""
        if reason:
            self.counters.fallback(op, dims, dtype, reason)
            return fallback()
        look = self.lookup(op, dims, dtype)
        if not look:
            self.counters.fallback(op, dims, dtype, look.reason)
            return fallback()
        k = look.kernel
        ident = (k.key, k.candidate, k.source_digest)
        broken = self.broken.get(ident)
        if broken:
            self.counters.fallback(op, dims, dtype, "entry disabled after %s" % broken)
            return fallback()
        try:
            result = launch(k)
        except Skip as e:
            self.counters.fallback(op, dims, dtype, str(e))
            return fallback()
        except CompileError as e:
            why = "compile_error: %s" % str(e).splitlines()[0]
        except LaunchError as e:
            why = "launch_error: %s" % e.message
        else:
            self.counters.hit(op, dims, dtype)
            return result
        with self._lock:
            self.broken[ident] = why
        self.counters.fallback(op, dims, dtype, why, error=True)
        return fallback()
