"""akprofile's binding on a CPU: packages, tamper refusal, lookups and
fallbacks with the C library's reasons, compile options and the worker's
cache key, the launch argument block, and the router's counting."""
import os
import shutil
import struct
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.normpath(os.path.join(os.path.dirname(__file__), "..")))
sys.path.insert(0, os.path.dirname(__file__))

import akprofile                                     # noqa: E402
from akprofile import nvrtc, _lib                    # noqa: E402
from akprofile.router import Router, Counters, Skip  # noqa: E402
import pkg                                           # noqa: E402

H200 = akprofile.Device("NVIDIA H200", 9, 0, 580, "13.0")


class PackageTest(unittest.TestCase):
    def setUp(self):
        self.dir = pkg.build()

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def test_load_and_entries(self):
        p = akprofile.Profile(self.dir)
        self.assertEqual(p.name, "prod")
        self.assertEqual(p.classes, [pkg.CLASS])
        es = p.entries(0)
        self.assertEqual([e.op for e in es], ["softmax", "rmsnorm"])
        k = es[0]
        self.assertEqual((k.candidate, k.entry, k.backend), ("warp_row", "ak_kernel", "cuda"))
        self.assertEqual(k.params, [("ROWS", 2), ("VEC", 4)])
        self.assertEqual((k.grid, k.block, k.shared_bytes), ((16, 1, 1), (32, 2, 1), 0))
        self.assertEqual(k.inputs, [("x", 4096)])
        self.assertEqual(k.outputs, [("y", 4096)])
        self.assertEqual(k.evidence, ["R00000007", "R00000001"])
        self.assertEqual(k.source, pkg.read("kernels/softmax/cuda/warp_row.cu"))
        self.assertEqual(k.prelude, pkg.prelude_cuda())
        self.assertAlmostEqual(k.speedup, 1.8)
        akprofile.verify(self.dir)
        p.close()
        p.close()

    def _refused(self, what):
        with self.assertRaises(akprofile.Tampered) as cm:
            akprofile.verify(self.dir)
        self.assertIn(what, cm.exception.message)
        with self.assertRaises(akprofile.Tampered) as cm:
            akprofile.Profile(self.dir)
        self.assertIn(what, cm.exception.message)
        with self.assertRaises(akprofile.PackageRefused):
            akprofile.Runtime(self.dir, device=H200)

    def test_tampered_profile_json(self):
        with open(os.path.join(self.dir, "profile.json"), "a") as f:
            f.write(" ")
        self._refused("profile.json: modified")

    def test_tampered_source(self):
        src = [f for f in os.listdir(os.path.join(self.dir, "sources")) if f.endswith(".cu")][0]
        with open(os.path.join(self.dir, "sources", src), "w") as f:
            f.write("evil")
        self._refused("modified")

    def test_extra_link_missing(self):
        extra = os.path.join(self.dir, "sources", "extra.cu")
        with open(extra, "w") as f:
            f.write("x")
        self._refused("extra file")
        os.unlink(extra)
        os.symlink("/etc/passwd", os.path.join(self.dir, "link"))
        self._refused("not a regular file")
        os.unlink(os.path.join(self.dir, "link"))
        akprofile.verify(self.dir)
        os.unlink(os.path.join(self.dir, "SHA256SUMS"))
        self._refused("not a profile package")

    def test_not_a_folder(self):
        with self.assertRaises(akprofile.PackageRefused):
            akprofile.Profile(os.path.join(self.dir, "nothing-here"))


class LookupTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = pkg.build()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_device_class(self):
        self.assertEqual(H200.device_class, pkg.CLASS)
        self.assertEqual(H200.arch, "sm_90")
        self.assertEqual(akprofile.Device("NVIDIA H100 80GB HBM3", 9, 0, 570, "12.8").device_class,
                         "NVIDIA_H100_80GB_HBM3/sm_90/drv570/nvrtc12.8")

    def test_exact_and_fallbacks(self):
        rt = akprofile.Runtime(self.dir, device=H200)
        self.assertTrue(rt.applies)
        hit = rt.lookup("softmax", [32, 128], "float32")
        self.assertTrue(hit)
        self.assertEqual(hit.kernel.candidate, "warp_row")
        near = rt.lookup("softmax", [32, 129], "float32")
        self.assertFalse(near)
        self.assertIn("no entry for softmax 32x129 float32", near.reason)
        self.assertIn("default kernel", near.reason)
        self.assertIn("tuned other shapes", near.reason)
        self.assertFalse(rt.lookup("softmax", [32, 128], "float16"))
        self.assertFalse(rt.lookup("softmax", [32], "float32"))
        other = rt.lookup("matmul", [32, 128, 64], "float32")
        self.assertIn("no entry for this operator", other.reason)
        self.assertTrue(rt.lookup("rmsnorm", [512, 2048], "bfloat16"))
        # akprofile.torch wraps only these (no wrapper cost for the others)
        self.assertEqual(rt.ops_with_entries(), {"softmax", "rmsnorm"})

    def test_vendor_entry_falls_back_with_its_reason(self):
        # where the profile kept cuBLASLt, the lookup is a fallback carrying
        # the entry's reason, like every other fallback
        d = pkg.build(entries=pkg.default_entries() + [pkg.vendor_entry("matmul", ["M", "N", "K"], [64, 64, 32],
                                                                         "float16")])
        try:
            rt = akprofile.Runtime(d, device=H200)
            look = rt.lookup("matmul", [64, 64, 32], "float16")
            self.assertFalse(look)
            self.assertIsNone(look.kernel)
            self.assertIn("vendor entry: no candidate beat cuBLASLt beyond the noise: best candidate mma",
                          look.reason)
            self.assertIn("run the default kernel (the vendor library cublaslt)", look.reason)
            v = rt.entries()[2]
            self.assertEqual((v.kind, v.vendor, v.vendor_op), ("vendor", "cublaslt", "matmul"))
            self.assertIn("no candidate beat cuBLASLt", v.reason)
            self.assertEqual((v.source, v.entry, v.has_launch, v.baseline_us), ("", "", False, 10.0))
            self.assertEqual(rt.entries()[0].kind, "kernel")
            self.assertEqual(rt.entries()[0].reason, "")
            # nothing to apply for matmul: akprofile.torch does not wrap it
            self.assertEqual(rt.ops_with_entries(), {"softmax", "rmsnorm"})
            self.assertEqual(rt.vendor_ops(), {"matmul"})
            self.assertTrue(rt.lookup("softmax", [32, 128], "float32"))
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_malformed_vendor_entry_refused(self):
        bad = pkg.vendor_entry("matmul", ["M", "N", "K"], [64, 64, 32], "float16")
        del bad["reason"]
        d = pkg.build(entries=pkg.default_entries() + [bad])
        try:
            with self.assertRaises(akprofile.PackageRefused) as cm:
                akprofile.Profile(d)
            self.assertIn("classes[0].entries[2].reason: a vendor entry needs a non-empty string",
                          cm.exception.message)
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_other_device_falls_back_everywhere(self):
        rt = akprofile.Runtime(self.dir, device=akprofile.Device("NVIDIA H200", 9, 0, 570, "13.0"))
        self.assertFalse(rt.applies)
        self.assertIn("has no class NVIDIA_H200/sm_90/drv570/nvrtc13.0", rt.why_not)
        self.assertIn("it has %s, not applied" % pkg.CLASS, rt.why_not)
        look = rt.lookup("softmax", [32, 128], "float32")
        self.assertFalse(look)
        self.assertIn("no entry for softmax 32x128 float32", look.reason)
        self.assertIn("has no class", look.reason)
        self.assertEqual(rt.entries(), [])
        self.assertEqual(rt.ops_with_entries(), set())

    def test_recorded_fields_must_match(self):
        # the class string says drv580 but the recorded device says otherwise
        d = pkg.build(device={"name": "NVIDIA H200", "cc_major": 9, "cc_minor": 0, "driver_major": 575,
                              "driver_version": "575.1", "nvrtc_version": "13.0"})
        try:
            rt = akprofile.Runtime(d, device=H200)
            self.assertFalse(rt.applies)
            self.assertIn("driver major differs", rt.why_not)
            self.assertFalse(rt.lookup("softmax", [32, 128], "float32"))
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_class_string_runtime(self):
        rt = akprofile.Runtime(self.dir, device=pkg.CLASS)
        self.assertTrue(rt.lookup("softmax", [32, 128], "float32"))
        with self.assertRaises(akprofile.Unavailable):
            akprofile.Launcher(rt)

    def test_current_device(self):
        # a CPU host says why; a GPU host answers a device with a class
        try:
            dev = akprofile.current_device(0)
        except akprofile.Unavailable as e:
            self.assertTrue(e.message)
        else:
            self.assertGreater(dev.cc_major, 0)
            self.assertIn("/sm_", dev.device_class)


class CompileTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = pkg.build()
        cls.rt = akprofile.Runtime(cls.dir, device=H200)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_options(self):
        k = self.rt.lookup("softmax", [32, 128], "float32").kernel
        self.assertEqual(k.compile_options(), ["-DAK_DTYPE_FLOAT32=1", "-DROWS=2", "-DVEC=4"])
        self.assertEqual(nvrtc.build_options(k, "sm_90", None),
                         ["--gpu-architecture=sm_90", "--std=c++17", "-DAK_DTYPE_FLOAT32=1", "-DROWS=2", "-DVEC=4"])
        self.assertEqual(nvrtc.build_options(k, "sm_90", "/cuda/include")[2:4],
                         ["--include-path=/cuda/include", "-DAK_CUDA_HALF=1"])
        b = self.rt.lookup("rmsnorm", [512, 2048], "bfloat16").kernel
        self.assertEqual(b.compile_options(), ["-DAK_DTYPE_BFLOAT16=1", "-DROWS=4", "-DVEC=2"])
        with self.assertRaises(nvrtc.CompileError):
            nvrtc.build_options(b, "sm_90", None)

    def test_source_text_and_key(self):
        k = self.rt.lookup("softmax", [32, 128], "float32").kernel
        text = nvrtc.source_text(k)
        self.assertTrue(text.startswith('#line 1 "ak_kernel_cuda.h"\n'))
        self.assertIn('\n#line 1 "kernel.cu"\n' + k.source, text)
        opts = nvrtc.build_options(k, "sm_90", None)
        key = nvrtc.cache_key(k.source, k.prelude, opts, "sm_90", "13.0", "")
        self.assertEqual(len(key), 64)
        self.assertNotEqual(key, nvrtc.cache_key(k.source, k.prelude, opts, "sm_100", "13.0", ""))
        self.assertNotEqual(key, nvrtc.cache_key(k.source, k.prelude, opts, "sm_90", "13.1", ""))
        self.assertNotEqual(key, nvrtc.cache_key(k.source + " ", k.prelude, opts, "sm_90", "13.0", ""))
        # the worker's own key for this build (tests/unit/test_akprofile_py.c computes it
        # with ak_cuda_options and ak_cuda_cache_key)
        want = os.environ.get("AKPROFILE_TEST_WORKER_KEY")
        want_opts = os.environ.get("AKPROFILE_TEST_WORKER_OPTIONS")
        if want:
            self.assertEqual("\n".join(opts), want_opts)
            self.assertEqual(key, want)

    def test_launch_args_block(self):
        k = self.rt.lookup("rmsnorm", [512, 2048], "bfloat16").kernel
        block = k.launch_args([0x1000, 0x2000], [0x3000])
        self.assertEqual(len(block), 216)
        dims = struct.unpack_from("<8q", block, 0)
        self.assertEqual(dims[:2], (512, 2048))
        self.assertEqual(struct.unpack_from("<i", block, 64)[0], 2)
        self.assertEqual(struct.unpack_from("<8Q", block, 72)[:3], (0x1000, 0x2000, 0))
        self.assertEqual(struct.unpack_from("<i", block, 136)[0], 2)
        self.assertEqual(struct.unpack_from("<8Q", block, 144)[:2], (0x3000, 0))
        self.assertEqual(struct.unpack_from("<i", block, 208)[0], 1)
        with self.assertRaises(akprofile.AkpError) as cm:
            k.launch_args([0x1000], [0x3000])
        self.assertIn("1 inputs and 1 outputs given, the entry has 2 and 1", cm.exception.message)
        with self.assertRaises(akprofile.AkpError):
            k.launch_args([0x1000, 0], [0x3000])

    def test_launch_refuses_without_function(self):
        import ctypes
        k = self.rt.lookup("softmax", [32, 128], "float32").kernel
        ins = (ctypes.c_uint64 * 1)(0x1000)
        outs = (ctypes.c_uint64 * 1)(0x2000)
        err = ctypes.create_string_buffer(256)
        rc = _lib.lib().akp_launch(k._ptr, None, None, ins, 1, outs, 1, None, err, len(err))
        self.assertEqual(rc, _lib.AKP_EINVAL)

    def test_prepared_block_layout(self):
        """The hot path's layout (akp_launch_prepare's offsets) is the block's:
        pointers written at the offsets land where akp_launch_args puts them."""
        import ctypes
        k = self.rt.lookup("rmsnorm", [512, 2048], "bfloat16").kernel
        lib = _lib.lib()
        in_off, out_off = ctypes.c_size_t(0), ctypes.c_size_t(0)
        rc = ctypes.c_int(0)
        err = ctypes.create_string_buffer(256)
        r = lib.akp_launch_prepare(k._ptr, None, ctypes.byref(in_off), ctypes.byref(out_off), ctypes.byref(rc),
                                   err, len(err))
        self.assertEqual(r, _lib.AKP_EINVAL)          # no function: refused, the layout still told
        self.assertIn("no entry or no function", _lib.text(err))
        want = k.launch_args([0x1000, 0x2000], [0x3000])
        block = (ctypes.c_ubyte * _lib.AKP_ARGS_BYTES)()
        ones = (ctypes.c_uint64 * 2)(1, 1)
        self.assertEqual(lib.akp_launch_args(k._ptr, ones, 2, ones, 1, block, len(block), err, len(err)),
                         _lib.AKP_OK)
        for off, ptr in ((in_off.value, 0x1000), (in_off.value + 8, 0x2000), (out_off.value, 0x3000)):
            ctypes.c_uint64.from_buffer(block, off).value = ptr
        self.assertEqual(bytes(block), bytes(want))
        # a block launched before any prepare: an error code, not a crash
        if _lib.lib().akp_launch_prepare(k._ptr, ctypes.c_void_p(1), None, None, None, err, len(err)) != _lib.AKP_OK:
            self.assertNotEqual(lib.akp_launch_block(k._ptr, ctypes.c_void_p(1), None, block), 0)

    def test_library_lookup_env(self):
        path = akprofile.find_library()
        self.assertTrue(os.path.isfile(path))
        old = os.environ.get("AKPROFILE_LIB")
        os.environ["AKPROFILE_LIB"] = "/nonexistent/libakprofile.so"
        try:
            with self.assertRaises(akprofile.LibraryNotFound):
                akprofile.find_library()
        finally:
            if old is None:
                del os.environ["AKPROFILE_LIB"]
            else:
                os.environ["AKPROFILE_LIB"] = old


class FakeRuntime:
    def __init__(self, answers):
        self.answers = answers
        self.asked = 0

    def lookup(self, op, dims, dtype):
        self.asked += 1
        return self.answers.get((op, tuple(dims), dtype)) or akprofile.Lookup(None, "no entry for %s" % op)


class RouterTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = pkg.build()
        cls.rt = akprofile.Runtime(cls.dir, device=H200)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_hits_fallbacks_and_broken_entries(self):
        r = Router(self.rt)
        hit = lambda k: "tuned:" + k.candidate   # noqa: E731
        fb = lambda: "torch"                     # noqa: E731
        self.assertEqual(r.dispatch("softmax", [32, 128], "float32", hit, fb), "tuned:warp_row")
        self.assertEqual(r.dispatch("softmax", [32, 128], "float32", hit, fb), "tuned:warp_row")
        self.assertEqual(r.dispatch("softmax", [32, 129], "float32", hit, fb), "torch")
        self.assertEqual(r.dispatch("softmax", [32, 128], "float32", hit, fb, reason="non-contiguous"), "torch")

        def skip(k):
            raise Skip("CUDA graph capture: not loaded")
        self.assertEqual(r.dispatch("softmax", [32, 128], "float32", skip, fb), "torch")

        def boom(k):
            raise akprofile.LaunchError("cuLaunchKernel: CUDA_ERROR_INVALID_VALUE (1) for softmax",
                                        "CUDA_ERROR_INVALID_VALUE")
        self.assertEqual(r.dispatch("rmsnorm", [512, 2048], "bfloat16", boom, fb), "torch")
        # the entry stays off afterwards, with the error named
        self.assertEqual(r.dispatch("rmsnorm", [512, 2048], "bfloat16", hit, fb), "torch")
        t = r.counters.totals()
        self.assertEqual(t, {"calls": 7, "hits": 2, "fallbacks": 5, "errors": 1})
        rows = {(c["op"], c["shape"]): c for c in r.counters.to_json()["calls"]}
        sm = rows[("softmax", "32x128")]
        self.assertEqual(sm["hits"], 2)
        self.assertEqual({x["reason"] for x in sm["reasons"]}, {"non-contiguous", "CUDA graph capture: not loaded"})
        near = rows[("softmax", "32x129")]
        self.assertIn("no entry for softmax 32x129 float32", near["reasons"][0]["reason"])
        rms = rows[("rmsnorm", "512x2048")]
        self.assertEqual(rms["hits"], 0)
        self.assertIn("CUDA_ERROR_INVALID_VALUE", rms["errors"][0]["error"])
        self.assertTrue(any(x["reason"].startswith("entry disabled after launch_error") for x in rms["reasons"]))

    def test_lookups_are_memoised(self):
        fake = FakeRuntime({})
        r = Router(fake)
        for _ in range(5):
            r.dispatch("softmax", [4, 8], "float32", lambda k: 1, lambda: 0)
        self.assertEqual(fake.asked, 1)
        self.assertEqual(r.counters.totals()["fallbacks"], 5)

    def test_report_and_json(self):
        c = Counters()
        c.hit("softmax", [32, 128], "float32")
        c.fallback("softmax", [32, 129], "float32", "no entry")
        import io
        out = io.StringIO()
        c.report(out)
        self.assertIn("2 calls, 1 hit the profile (50.0%)", out.getvalue())
        d = tempfile.mkdtemp()
        try:
            c.write_json(os.path.join(d, "r.json"), {"profile": "prod"})
            import json
            with open(os.path.join(d, "r.json")) as f:
                doc = json.load(f)
            self.assertEqual(doc["profile"], "prod")
            self.assertEqual(doc["totals"]["hits"], 1)
        finally:
            shutil.rmtree(d)


if __name__ == "__main__":
    unittest.main()
