#!/usr/bin/env python3
"""ops/bench/best_by_candidate.py: per workload, the best each candidate
reached in a batch's timings.

    python3 ops/bench/best_by_candidate.py RECEIPTS.json [--out FILE.md]

RECEIPTS.json is what `akctl receipts BATCH --json` prints.  A batch promotes
one configuration of an operator for all its workloads (docs/profiles.md);
this table shows what each candidate reached on each workload alone (the
lowest candidate median over the batch's ok tune and confirm receipts), so
the cost of one configuration for every shape can be read off: the last
column is the promoted-winner-independent best, and "(best config)" names
it.  Prints Markdown; --out writes it to FILE too.
"""
import argparse
import json
import sys


def rows(receipts):
    best = {}                        # (op, workload, dtype, candidate) -> (us, config)
    order = []
    for r in receipts:
        if r.get("kind") not in ("tune", "confirm") or r.get("status") != "ok":
            continue
        cand = r.get("candidate_name") or "?"
        cfg = " ".join("%s=%s" % (p["name"], p["value"]) for p in r.get("params") or [])
        for t in r.get("timings") or []:
            w = t.get("workload") or {}
            us = (t.get("candidate") or {}).get("median_us")
            if not us:
                continue
            key = (r.get("op", "?"), w.get("name", "?"), w.get("dtype", "?"), cand)
            if key not in best:
                order.append(key)
            if key not in best or us < best[key][0]:
                best[key] = (us, cfg)
    return best, order


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("receipts")
    ap.add_argument("--out")
    a = ap.parse_args()
    try:
        data = json.load(open(a.receipts))
    except (OSError, ValueError) as e:
        print("best_by_candidate.py: %s: %s" % (a.receipts, e), file=sys.stderr)
        return 2
    receipts = data.get("receipts", []) if isinstance(data, dict) else data
    best, order = rows(receipts)
    if not best:
        print("best_by_candidate.py: %s: no ok tune or confirm receipt with timings" % a.receipts, file=sys.stderr)
        return 1
    cands = []
    for (_, _, _, c) in order:
        if c not in cands:
            cands.append(c)
    works = []
    for (op, w, dt, _) in order:
        if (op, w, dt) not in works:
            works.append((op, w, dt))
    lines = ["| op | workload | dtype | " + " | ".join("%s us" % c for c in cands) + " | best (config) |",
             "|---|---|---|" + "---:|" * len(cands) + "---|"]
    for (op, w, dt) in works:
        cells, top = [], None
        for c in cands:
            v = best.get((op, w, dt, c))
            cells.append("%.2f" % v[0] if v else "-")
            if v and (top is None or v[0] < top[1]):
                top = (c, v[0], v[1])
        lines.append("| %s | %s | %s | %s | %s %s |" % (op, w, dt, " | ".join(cells), top[0], top[2]))
    text = "\n".join(lines) + "\n"
    sys.stdout.write(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
