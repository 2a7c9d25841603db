"""akprofile.torch with PyTorch present (not in CTest: the CI box has no
PyTorch).  Run on a GPU host:

    cd lib/akprofile/python && python3 -m unittest discover -s tests_torch -v

CPU part: the wrappers install and restore PyTorch's functions exactly and
fall back, counted with their reasons, for CPU tensors.  GPU part (skipped
without CUDA): a package for this GPU's class with softmax warp_row
(32x128 float32) and rmsnorm warp_row (64x256 bfloat16): the routed calls
must hit, match PyTorch within the spec tolerances, a near shape must fall
back, and a launch failure must disable the entry with the CUDA error named.
"""
import os
import shutil
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..")))
sys.path.insert(0, os.path.normpath(os.path.join(HERE, "..", "tests")))

import torch                                    # noqa: E402
import torch.nn.functional as F                 # noqa: E402
import akprofile                                # noqa: E402
import akprofile.torch as akt                   # noqa: E402
import pkg                                      # noqa: E402


class CpuTest(unittest.TestCase):
    def setUp(self):
        self.dir = pkg.build()

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_install_restore_and_cpu_fallbacks(self):
        before = (F.softmax, torch.softmax, F.linear, F.layer_norm, torch.matmul, "softmax" in torch.Tensor.__dict__)
        a = akt.enable(self.dir, device=pkg.CLASS, print_at_exit=False)
        self.assertIsNot(F.softmax, before[0])
        x = torch.randn(32, 128)
        self.assertTrue(torch.allclose(F.softmax(x, dim=-1), torch.exp(x) / torch.exp(x).sum(-1, keepdim=True),
                                       atol=1e-6))
        x.softmax(-1)
        torch.softmax(x, 0)
        F.layer_norm(x, (128,), torch.ones(128), torch.zeros(128))
        F.linear(x, torch.randn(16, 128))
        x @ torch.randn(128, 8)
        F.cross_entropy(x, torch.zeros(32, dtype=torch.long))
        akt.rotary_embedding(torch.randn(1, 2, 4, 8))
        a.deactivate()
        after = (F.softmax, torch.softmax, F.linear, F.layer_norm, torch.matmul, "softmax" in torch.Tensor.__dict__)
        self.assertEqual(before, after)
        doc = a.to_json()
        reasons = {r["reason"] for c in doc["calls"] for r in c["reasons"]}
        self.assertTrue(any("no CUDA device" in r for r in reasons), reasons)
        self.assertTrue(any("softmax over dim 0" in r for r in reasons), reasons)
        self.assertEqual(doc["totals"]["hits"], 0)
        # F.softmax's own fallback calls Tensor.softmax: still one call
        self.assertEqual([c["fallbacks"] for c in doc["calls"] if c["op"] == "softmax" and c["shape"] == "32x128"],
                         [3])

    def test_unknown_op_refused(self):
        with self.assertRaises(ValueError):
            akt.enable(self.dir, ops=["softmaks"], device=pkg.CLASS, print_at_exit=False)


@unittest.skipUnless(torch.cuda.is_available(), "no CUDA device")
class GpuTest(unittest.TestCase):
    def setUp(self):
        dev = akprofile.current_device(torch.cuda.current_device())
        info = pkg.device_info(dev)
        grid_rms = (64 + 3) // 4
        entries = [
            pkg.entry("softmax", ["rows", "cols"], [32, 128], "float32", "warp_row", "kernels/softmax/cuda/warp_row.cu",
                      [("ROWS", 2), ("VEC", 1)], [16, 1, 1], [32, 2, 1], [("x", 4096)], [("y", 4096)]),
            pkg.entry("rmsnorm", ["M", "N"], [64, 256], "bfloat16", "warp_row", "kernels/rmsnorm/cuda/warp_row.cu",
                      [("ROWS", 4), ("VEC", 1)], [grid_rms, 1, 1], [32, 4, 1], [("x", 64 * 256), ("w", 256)],
                      [("y", 64 * 256)]),
            # decode attention over a KV cache, and grouped KV heads (split_kv, SPLITS 4 WARPS 4 KPW 1 ROWS 1)
            pkg.entry("split_kv_attention", ["B", "Q", "HQ", "HK", "L", "D", "mask"], [1, 1, 4, 4, 64, 64, 1],
                      "bfloat16", "split_kv", "kernels/split_kv_attention/cuda/split_kv.cu",
                      [("SPLITS", 4), ("WARPS", 4), ("KPW", 1), ("ROWS", 1), ("VECB", 16)], [4, 4, 1], [128, 1, 1],
                      [("q", 256), ("k_cache", 4 * 64 * 64), ("v_cache", 4 * 64 * 64)], [("o", 256)], shared=1056),
            pkg.entry("split_kv_attention", ["B", "Q", "HQ", "HK", "L", "D", "mask"], [1, 1, 8, 2, 64, 64, 1],
                      "bfloat16", "split_kv", "kernels/split_kv_attention/cuda/split_kv.cu",
                      [("SPLITS", 4), ("WARPS", 4), ("KPW", 1), ("ROWS", 1), ("VECB", 16)], [4, 2, 4], [128, 1, 1],
                      [("q", 512), ("k_cache", 2 * 64 * 64), ("v_cache", 2 * 64 * 64)], [("o", 512)], shared=1056),
            # a launch the driver must refuse: 4096 threads per block
            pkg.entry("softmax", ["rows", "cols"], [8, 128], "float32", "warp_row", "kernels/softmax/cuda/warp_row.cu",
                      [("ROWS", 128), ("VEC", 1)], [1, 1, 1], [32, 128, 1], [("x", 1024)], [("y", 1024)]),
        ]
        self.dir = pkg.build(entries=entries, device_class=dev.device_class, device=info)

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_decode_attention(self):
        """SDPA over a KV cache (1 query, 64 keys) and with grouped KV heads
        routes to split_kv_attention and matches PyTorch; is_causal with
        fewer queries than keys falls back (PyTorch's diagonal is top-left)."""
        a = akt.enable(self.dir, ops=["scaled_dot_product_attention"], print_at_exit=False)
        try:
            with torch.inference_mode():
                for hq, hk in ((4, 4), (8, 2)):
                    q = torch.randn(1, hq, 1, 64, device="cuda", dtype=torch.bfloat16)
                    k = torch.randn(1, hk, 64, 64, device="cuda", dtype=torch.bfloat16)
                    v = torch.randn(1, hk, 64, 64, device="cuda", dtype=torch.bfloat16)
                    kw = {"enable_gqa": True} if hq != hk else {}
                    o = F.scaled_dot_product_attention(q, k, v, **kw)
                    a.deactivate()
                    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), **kw)
                    a.activate()
                    torch.testing.assert_close(o.float(), ref, atol=0.004 * 4, rtol=0.016 * 2)
                    F.scaled_dot_product_attention(q, k, v, is_causal=True, **kw)
                torch.cuda.synchronize()
        finally:
            a.deactivate()
        rows = {(c["op"], c["shape"]): c for c in a.to_json()["calls"]}
        self.assertEqual(rows[("split_kv_attention", "1x1x4x4x64x64x1")]["hits"], 1)
        self.assertEqual(rows[("split_kv_attention", "1x1x8x2x64x64x1")]["hits"], 1)
        causal = rows[("split_kv_attention", "1x1x4x4x64x64x2")]
        self.assertEqual(causal["hits"], 0)

    def test_hits_match_pytorch(self):
        a = akt.enable(self.dir, print_at_exit=False)
        try:
            with torch.inference_mode():
                x = torch.randn(32, 128, device="cuda")
                y = F.softmax(x, dim=-1)
                a.deactivate()
                ref = F.softmax(x, dim=-1)
                a.activate()
                torch.testing.assert_close(y, ref, atol=1e-5, rtol=1e-5)
                xb = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
                w = torch.rand(256, device="cuda", dtype=torch.bfloat16) + 0.5
                if hasattr(F, "rms_norm"):
                    yb = F.rms_norm(xb, (256,), w, eps=1e-6)
                    a.deactivate()
                    refb = F.rms_norm(xb.float(), (256,), w.float(), eps=1e-6).to(torch.bfloat16)
                    a.activate()
                    torch.testing.assert_close(yb.float(), refb.float(), atol=0.1, rtol=0.05)
                F.softmax(torch.randn(32, 129, device="cuda"), dim=-1)        # near shape: fallback
                F.softmax(torch.randn(8, 128, device="cuda"), dim=-1)         # refused launch
                F.softmax(torch.randn(8, 128, device="cuda"), dim=-1)         # now disabled
                torch.cuda.synchronize()
        finally:
            a.deactivate()
        doc = a.to_json()
        rows = {(c["op"], c["shape"]): c for c in doc["calls"]}
        self.assertEqual(rows[("softmax", "32x128")]["hits"], 1)
        if hasattr(F, "rms_norm"):
            self.assertEqual(rows[("rmsnorm", "64x256")]["hits"], 1)
        self.assertEqual(rows[("softmax", "32x129")]["hits"], 0)
        bad = rows[("softmax", "8x128")]
        self.assertEqual(bad["hits"], 0)
        self.assertIn("CUDA_ERROR_", bad["errors"][0]["error"])
        self.assertTrue(any("entry disabled after launch_error" in r["reason"] for r in bad["reasons"]))


if __name__ == "__main__":
    unittest.main()
