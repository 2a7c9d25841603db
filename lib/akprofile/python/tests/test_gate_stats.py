"""The gate's arithmetic without a GPU or PyTorch: the paired speedup and
its interval (as worker/timing.c computes a kernel's), closeness, the
tolerance file, the verdict rule, and the driver's argument checks."""
import json
import math
import os
import shutil
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(__file__), "..")))

from akprofile import stats   # noqa: E402


class SpeedupTest(unittest.TestCase):
    def test_constant_ratio(self):
        s, n = stats.paired_speedup([2.0] * 12, [1.0] * 12)
        self.assertEqual((s, n), (2.0, 0.0))

    def test_order_statistics_interval(self):
        # ratios 1..11: median 6; half = 0.98 sqrt(11) = 3.25 -> ranks 2 and 9
        off = [float(r) for r in range(1, 12)]
        s, n = stats.paired_speedup(off, [1.0] * 11)
        self.assertEqual(s, 6.0)
        self.assertAlmostEqual(n, 0.5 * (10.0 - 3.0))

    def test_even_count_and_pairing(self):
        # the pairs, not the sorted sides, give the ratios
        s, _ = stats.paired_speedup([4.0, 1.0, 3.0, 2.0], [2.0, 1.0, 1.0, 1.0])
        self.assertEqual(s, 2.0)          # ratios 2, 1, 3, 2 -> (2 + 2) / 2
        s, _ = stats.paired_speedup([1.0, 2.0, 3.0, 4.0], [1.0] * 4)
        self.assertEqual(s, 2.5)

    def test_one_pair_and_bad_samples(self):
        self.assertEqual(stats.paired_speedup([3.0], [2.0]), (1.5, 1.5))
        self.assertEqual(stats.paired_speedup([0.0, -1.0], [1.0, 1.0]), (0.0, 0.0))
        s, _ = stats.paired_speedup([2.0, 0.0, 2.0], [1.0, 1.0, 1.0])
        self.assertEqual(s, 2.0)

    def test_interval_narrows_with_agreement(self):
        noisy = [1.0 + 0.1 * ((i * 7) % 5 - 2) for i in range(20)]
        quiet = [1.0 + 0.01 * ((i * 7) % 5 - 2) for i in range(20)]
        self.assertGreater(stats.paired_speedup(noisy, [1.0] * 20)[1], stats.paired_speedup(quiet, [1.0] * 20)[1])

    def test_describe_as_common_stats(self):
        d = stats.describe([5.0, 1.0, 3.0, 2.0, 4.0])
        self.assertEqual((d["n"], d["median"], d["min"], d["mean"]), (5, 3.0, 1.0, 3.0))
        self.assertAlmostEqual(d["p10"], 1.4)
        self.assertAlmostEqual(d["p90"], 4.6)
        self.assertEqual(stats.describe([])["n"], 0)


class CompareTest(unittest.TestCase):
    def test_within_and_beyond(self):
        r = stats.compare([1.0, 2.05, 3.0], [1.0, 2.0, 3.0], atol=0.01, rtol=0.01)
        self.assertEqual(r["violations"], 1)       # 0.05 > 0.01 + 0.02
        self.assertAlmostEqual(r["max_abs"], 0.05)
        r = stats.compare([1.0, 2.02, 3.0], [1.0, 2.0, 3.0], atol=0.01, rtol=0.01)
        self.assertEqual(r["violations"], 0)
        self.assertAlmostEqual(r["rel_rms"], math.sqrt(0.02 ** 2 / 14.0))

    def test_non_finite(self):
        r = stats.compare([float("nan"), 1.0], [0.0, 1.0], 1.0, 1.0)
        self.assertEqual((r["violations"], r["finite_mismatch"]), (1, 1))
        self.assertEqual(r["rel_rms"], math.inf)
        r = stats.compare([float("inf")], [float("inf")], 0, 0)
        self.assertEqual(r["violations"], 0)
        r = stats.compare([float("-inf")], [float("inf")], 0, 0)
        self.assertEqual(r["violations"], 1)
        r = stats.compare([float("nan")], [float("nan")], 0, 0)
        self.assertEqual(r["violations"], 0)
        with self.assertRaises(ValueError):
            stats.compare([1.0], [1.0, 2.0], 0, 0)


class ToleranceTest(unittest.TestCase):
    def test_defaults_and_override(self):
        d = stats.load_tolerance()
        self.assertEqual(d, stats.DEFAULT_TOLERANCE)
        t = stats.load_tolerance(text='{"schema_version": 1, "vs_off": {"atol": 0.5}}')
        self.assertEqual(t["vs_off"], {"atol": 0.5, "rtol": stats.DEFAULT_TOLERANCE["vs_off"]["rtol"]})
        self.assertEqual(t["latency"], stats.DEFAULT_TOLERANCE["latency"])

    def test_refusals_name_the_field(self):
        cases = [('{"schema_version": 1, "vs_of": {}}', "vs_of: unknown field"),
                 ('{"schema_version": 1, "vs_off": {"atl": 1}}', "vs_off.atl: unknown field"),
                 ('{"schema_version": 1, "vs_off": {"atol": -1}}', "vs_off.atol"),
                 ('{"schema_version": 1, "vs_off": {"atol": "1"}}', "vs_off.atol"),
                 ('{"schema_version": 1, "vs_float32": {"factor": 0.5}}', "vs_float32.factor"),
                 ('{"vs_off": {}}', "schema_version"),
                 ('[1]', "not a JSON object"),
                 ('{', "tolerance")]
        for text, what in cases:
            with self.assertRaises(stats.ToleranceError) as cm:
                stats.load_tolerance(text=text)
            self.assertIn(what, str(cm.exception), text)

    def test_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"schema_version": 1, "latency": {"min_speedup": 1.02}}, f)
        try:
            self.assertEqual(stats.load_tolerance(f.name)["latency"]["min_speedup"], 1.02)
        finally:
            os.unlink(f.name)
        with self.assertRaises(stats.ToleranceError) as cm:
            stats.load_tolerance("/nonexistent/tol.json")
        self.assertIn("/nonexistent/tol.json", str(cm.exception))


class DecideTest(unittest.TestCase):
    TOL = stats.load_tolerance()
    CLOSE = {"n": 10, "violations": 0, "max_abs": 0.01, "rel_rms": 0.001, "finite_mismatch": 0}
    HITS = {"calls": 40, "hits": 30, "fallbacks": 10, "errors": 0}

    def test_accepted(self):
        v = stats.decide(self.TOL, 1.10, 0.02, self.CLOSE, 0.010, 0.009, self.HITS)
        self.assertEqual(v["verdict"], "accepted")
        self.assertTrue(v["accepted"])
        self.assertTrue(all(c["ok"] for c in v["checks"].values()))

    def test_not_faster_beyond_noise_is_slower(self):
        v = stats.decide(self.TOL, 1.01, 0.02, self.CLOSE, 0.010, 0.009, self.HITS)
        self.assertEqual(v["verdict"], "rejected (slower)")
        v = stats.decide(self.TOL, 0.9, 0.01, self.CLOSE, 0.010, 0.009, self.HITS)
        self.assertEqual(v["reasons"], ["slower"])

    def test_outputs_differ(self):
        bad = dict(self.CLOSE, violations=3)
        self.assertEqual(stats.decide(self.TOL, 1.2, 0.01, bad, 0.01, 0.009, self.HITS)["reasons"],
                         ["outputs differ"])
        # close to the profile-off run but further from float32 than it allows
        v = stats.decide(self.TOL, 1.2, 0.01, self.CLOSE, 0.05, 0.009, self.HITS)
        self.assertEqual(v["reasons"], ["outputs differ"])
        self.assertAlmostEqual(v["checks"]["vs_float32"]["limit"], 1.25 * 0.009 + 0.002)
        v = stats.decide(self.TOL, 1.2, 0.01, self.CLOSE, math.inf, 0.009, self.HITS)
        self.assertEqual(v["reasons"], ["outputs differ"])

    def test_no_entry_and_launch_failures(self):
        v = stats.decide(self.TOL, 1.0, 0.01, self.CLOSE, 0.009, 0.009, {"calls": 40, "hits": 0, "errors": 0})
        self.assertEqual(v["verdict"], "rejected (slower, no entry applied)")
        v = stats.decide(self.TOL, 1.2, 0.01, self.CLOSE, 0.009, 0.009, dict(self.HITS, errors=2))
        self.assertEqual(v["reasons"], ["launch failed"])
        for r in v["reasons"]:
            self.assertIn(r, stats.VERDICT_REASONS)


class DriverArgsTest(unittest.TestCase):
    def test_steps_and_warmup_bounds(self):
        from akprofile import gate
        for argv in (["--profile", "/p", "--steps", "9", "s.py"], ["--profile", "/p", "--warmup", "0", "s.py"],
                     ["s.py"]):
            with self.assertRaises(SystemExit) as cm:
                gate.main(argv)
            self.assertEqual(cm.exception.code, 2)

    def test_package_identity(self):
        """What a recorded gate is tied to (docs/apply.md "Recording the
        verdict"): each class's updated_ms and the SHA256SUMS digest."""
        import hashlib
        import pkg
        from akprofile import gate
        d = pkg.build()
        self.addCleanup(shutil.rmtree, d, True)
        classes, sums = gate.package_identity(d)
        self.assertEqual(classes, {pkg.CLASS: 1})
        with open(os.path.join(d, "SHA256SUMS"), "rb") as f:
            self.assertEqual(sums, hashlib.sha256(f.read()).hexdigest())

    def test_clean_json(self):
        from akprofile import gate
        doc = gate._clean({"a": math.inf, "b": [math.nan, 1.0], "c": {"d": -math.inf}})
        self.assertEqual(doc, {"a": "inf", "b": ["nan", 1.0], "c": {"d": "-inf"}})
        json.dumps(doc, allow_nan=False)


if __name__ == "__main__":
    unittest.main()
