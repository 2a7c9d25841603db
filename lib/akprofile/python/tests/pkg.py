"""Builds profile packages the way `akctl profile export` writes them
(profile.json, sources/<sha256>.cu|.h, SHA256SUMS), for the tests."""
import hashlib
import json
import os
import tempfile

ROOT = os.environ.get("AK_SOURCE_DIR") or os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..",
                                                                        "..", ".."))
CLASS = "NVIDIA_H200/sm_90/drv580/nvrtc13.0"


def read(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def prelude_cuda():
    """The CUDA prelude as the worker embeds it and a profile records it:
    kernels/ak_kernel_cuda.h, then kernels/ak_blocks_cuda.h and
    kernels/ak_hopper_cuda.h."""
    return read("kernels/ak_kernel_cuda.h") + read("kernels/ak_blocks_cuda.h") + read("kernels/ak_hopper_cuda.h")


def entry(op, keys, dims, dtype, candidate, src_file, params, grid, block, inputs, outputs, shared=0):
    return {"op": op, "key": "%s/%s/%s" % (op, ",".join("%s=%d" % kd for kd in zip(keys, dims)), dtype),
            "keys": keys, "dims": dims, "dtype": dtype, "workload": "w", "candidate": candidate,
            "params": [{"name": n, "value": v} for n, v in params], "backend": "cuda", "entry": "ak_kernel",
            "_src": src_file, "launch": {"grid": grid, "block": block, "shared_bytes": shared},
            "inputs": [{"name": n, "count": c} for n, c in inputs],
            "outputs": [{"name": n, "count": c} for n, c in outputs],
            "speedup": 1.8, "noise": 0.02, "op_speedup": 1.7, "op_noise": 0.02, "baseline_us": 10,
            "candidate_us": 5.5, "evidence": ["R00000007", "R00000001"], "batch_id": "B000001",
            "task_id": "B000001.0007", "installed_ms": 1}


def vendor_entry(op, keys, dims, dtype, vendor="cublaslt", vendor_op="matmul"):
    """A vendor entry as akfleet installs it where no candidate beat the
    vendor library (cuBLASLt): no kernel, the reason and the library's time."""
    return {"kind": "vendor", "op": op,
            "key": "%s/%s/%s" % (op, ",".join("%s=%d" % kd for kd in zip(keys, dims)), dtype),
            "keys": keys, "dims": dims, "dtype": dtype, "workload": "w", "candidate": "mma",
            "params": [{"name": "BM", "value": 64}], "backend": "cuda", "vendor": vendor, "vendor_op": vendor_op,
            "reason": "no candidate beat cuBLASLt beyond the noise: best candidate mma BM=64: 1.01x +- 0.02, "
                      "not beyond the 3% threshold by more than its noise",
            "speedup": 1.01, "noise": 0.02, "op_speedup": 1.01, "op_noise": 0.02, "baseline_us": 10,
            "candidate_us": 9.9, "evidence": ["R00000009"], "batch_id": "B000002", "task_id": "B000002.0001",
            "installed_ms": 1, "confirmed_on": None}


def default_entries():
    return [
        entry("softmax", ["rows", "cols"], [32, 128], "float32", "warp_row", "kernels/softmax/cuda/warp_row.cu",
              [("ROWS", 2), ("VEC", 4)], [16, 1, 1], [32, 2, 1], [("x", 4096)], [("y", 4096)]),
        entry("rmsnorm", ["M", "N"], [512, 2048], "bfloat16", "warp_row", "kernels/rmsnorm/cuda/warp_row.cu",
              [("ROWS", 4), ("VEC", 2)], [128, 1, 1], [32, 4, 1], [("x", 512 * 2048), ("w", 2048)],
              [("y", 512 * 2048)]),
    ]


def device_info(dev):
    """The device record of a package built for akprofile.Device dev."""
    return {"name": dev.name, "cc_major": dev.cc_major, "cc_minor": dev.cc_minor,
            "driver_major": dev.driver_major, "driver_version": "", "nvrtc_version": dev.nvrtc_version}


def build(dirname=None, entries=None, device_class=CLASS, name="prod", device=None):
    """Writes a package into dirname (a fresh temporary folder by default);
    returns its path."""
    d = dirname or tempfile.mkdtemp(prefix="akp-py-")
    os.makedirs(os.path.join(d, "sources"), exist_ok=True)
    sums = []

    def put(rel, text):
        with open(os.path.join(d, rel), "w") as f:
            f.write(text)
        sums.append("%s  %s\n" % (hashlib.sha256(text.encode()).hexdigest(), rel))

    def source(text, ext):
        dg = hashlib.sha256(text.encode()).hexdigest()
        rel = "sources/%s.%s" % (dg, ext)
        if not any(s.endswith(" " + rel + "\n") for s in sums):
            put(rel, text)
        return dg, rel

    pd, prel = source(prelude_cuda(), "h")
    out = []
    for e in entries if entries is not None else default_entries():
        e = dict(e)
        if e.get("kind") == "vendor":           # no kernel, no sources
            out.append(e)
            continue
        src = e.pop("_text", None)              # a planted source, given as text
        src = read(e.pop("_src")) if src is None else (e.pop("_src") and src)
        sd, srel = source(src, "cu")
        e["source"] = {"name": os.path.basename(srel), "digest": sd, "file": srel}
        e["prelude"] = {"digest": pd, "file": prel}
        out.append(e)
    dev = device or {"name": "NVIDIA H200", "cc_major": 9, "cc_minor": 0, "driver_major": 580,
                     "driver_version": "580.65", "nvrtc_version": "13.0"}
    doc = {"schema_version": 1, "format": "akfleet-profile", "profile": name,
           "classes": [{"device_class": device_class, "backend": "cuda", "device": dev, "updated_ms": 1,
                        "entries": out}]}
    put("profile.json", json.dumps(doc, indent=1) + "\n")
    with open(os.path.join(d, "SHA256SUMS"), "w") as f:
        f.write("".join(sums))
    return d
