#!/usr/bin/env python3
"""ops/bench/decode_variants.py: versions of mma_decode (or any
split_kv_attention kernel with its launch rule) side by side with PyTorch's
scaled_dot_product_attention on the decode shapes, in one process.

A development harness, not the tuner: the nightly (ops/bench/nightly_gpu.sh
with kernels/batches/decode_attention.json) is what measures candidates.
This one answers "is version B faster than version A" in seconds, with each
kernel and SDPA timed the same way: 20 launches captured in one CUDA graph,
the graph replayed 15 times, the median of the replays / 20 (so neither
Python nor the launch path is in the figure).  It also prints each
version's largest error against SDPA.

  build (where nvcc is; the CUDA prelude is prepended as the worker does):
    ops/bench/decode_variants.py build OUTDIR NAME=SRC[:DEF,DEF..] ...
    e.g. build /tmp/v old=/tmp/mma_old.cu:NW=8 new=kernels/split_kv_attention/cuda/mma_decode.cu:NW=8
    (a DEF arch=sm_90a builds for that architecture instead of sm_90:
    wg_decode, tma_decode)
  time (on the GPU machine: PyTorch with CUDA):
    ops/bench/decode_variants.py time NAME:CUBIN:NW:WAVES[:STG[:ROWS]][,...] SHAPE[,SHAPE..]
    (STG given: the kernel is stream_decode, built with that STG and
    ROWS, default 8, and launched by its rule)
    or NAME:CUBIN:CAND:P=V[+P=V..]: launched by the rule of the spec's
    candidate CAND with those parameters (grid, block and shared memory
    evaluated from kernels/split_kv_attention/spec.json), e.g.
    tile:/tmp/v/tile.cubin:tile_decode:BM=64+BN=32+WAVES=1
  ncu (one launch each, for `ncu -k ak_kernel -c 1 python3 ...`):
    ops/bench/decode_variants.py ncu NAME:CUBIN:NW:WAVES SHAPE

Every launch is its candidate's rule in kernels/split_kv_attention/spec.json
(grid, block and shared memory evaluated for the shape, bfloat16), with
the candidate's tensor maps (wg_decode's, tma_decode's) encoded over the shape's
buffers as the worker encodes them (cuTensorMapEncodeTiled, row-major
strides): the short forms are mma_decode's and stream_decode's.  Shapes: SHAPES below (bf16, mask
none: the unmasked forms of the batch's decode shapes; pi05 and pi05_b8
are pi0.5's denoise step, D 256).
"""
import ctypes
import functools
import json
import re
import os
import subprocess
import sys

SHAPES = {  # B, Q, HQ, HK, L, D, mask
    "b1_4k": (1, 1, 32, 8, 4096, 128, 1), "b1_32k": (1, 1, 32, 8, 32768, 128, 1),
    "b16_4k": (16, 1, 32, 32, 4096, 128, 1), "b8_32k": (8, 1, 32, 8, 32768, 128, 1),
    "b64_4k": (64, 1, 32, 8, 4096, 128, 1), "spec_b8_8k": (8, 4, 32, 8, 8192, 128, 1),
    "pi05": (1, 50, 8, 1, 866, 256, 1), "pi05_b8": (8, 50, 8, 1, 866, 256, 1),
}
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def die(msg):
    sys.exit(f"decode_variants: {msg}")


@functools.lru_cache(maxsize=None)
def load_spec():
    with open(os.path.join(ROOT, "kernels", "split_kv_attention", "spec.json")) as f:
        return json.load(f)


def spec_launch(cand, shp, params):
    """grid, block, shared bytes and tensor maps (buffer, dims, box,
    swizzle, L2 promotion, out-of-bounds fill) of the spec's candidate
    cand for the shape's dims and the parameters (bfloat16: b = 2), the
    spec's integer arithmetic evaluated in Python ("/" is integer
    division there)."""
    spec = load_spec()
    c = [x for x in spec["candidates"] if x["name"] == cand and x["backend"] == "cuda"]
    if not c:
        die(f"no cuda candidate '{cand}' in split_kv_attention's spec")
    env = dict(zip(spec["keys"], shp), b=2, **params)

    def ev(e):
        return int(eval(re.sub(r"(?<!/)/(?!/)", "//", e), {"__builtins__": {}}, env))
    la = c[0]["launch"]
    grid = [ev(e) for e in la["grid"]] + [1] * (3 - len(la["grid"]))
    block = [ev(e) for e in la["block"]] + [1] * (3 - len(la["block"]))
    maps = [(m["buffer"], [ev(e) for e in m["dims"]], [ev(e) for e in m["box"]], m.get("swizzle", "none"),
             m.get("l2_promotion", "none"), m.get("oob_fill", "zero")) for m in c[0].get("tensor_maps", [])]
    return grid, block, ev(la.get("shared", "0")), maps


def parse_kernel(spec):
    """NAME, CUBIN, the candidate and its parameters of a `time` argument:
    NAME:CUBIN:CAND:P=V[+P=V..], or the short forms NAME:CUBIN:NW:WAVES
    (mma_decode) and NAME:CUBIN:NW:WAVES:STG[:ROWS] (stream_decode, ROWS
    8 by default)."""
    parts = spec.split(":")
    if len(parts) == 4 and "=" in parts[3]:
        return parts[0], parts[1], parts[2], dict((kv.split("=")[0], int(kv.split("=")[1]))
                                                   for kv in parts[3].split("+"))
    if len(parts) == 4:
        return parts[0], parts[1], "mma_decode", {"NW": int(parts[2]), "WAVES": int(parts[3])}
    if len(parts) in (5, 6):
        return parts[0], parts[1], "stream_decode", {"NW": int(parts[2]), "WAVES": int(parts[3]),
                                                     "STG": int(parts[4]),
                                                     "ROWS": int(parts[5]) if len(parts) == 6 else 8}
    die(f"'{spec}': want NAME:CUBIN:NW:WAVES[:STG[:ROWS]] or NAME:CUBIN:CAND:P=V[+P=V..]")


def build(outdir, specs):
    nvcc = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
    # the prelude as the worker embeds it: the ABI, then the building blocks
    prelude = "".join(open(os.path.join(ROOT, "kernels", f)).read()
                      for f in ("ak_kernel_cuda.h", "ak_blocks_cuda.h", "ak_hopper_cuda.h"))
    os.makedirs(outdir, exist_ok=True)
    for spec in specs:
        name, _, rest = spec.partition("=")
        src, _, defs = rest.partition(":")
        if not name or not src:
            die(f"'{spec}': want NAME=SRC[:DEF,DEF..]")
        tmp = os.path.join(outdir, name + ".cu")
        with open(tmp, "w") as f:
            f.write(prelude + open(src).read())
        dl = [d for d in defs.split(",") if d]
        arch = ([d.split("=", 1)[1] for d in dl if d.startswith("arch=")] or ["sm_90"])[-1]
        cmd = [nvcc, "-std=c++17", "-arch=" + arch, "-cubin", "-o", os.path.join(outdir, name + ".cubin"),
               "--ptxas-options=-v", "-DAK_CUDA_HALF", "-DAK_DTYPE_BFLOAT16"]
        cmd += ["-D" + d for d in dl if not d.startswith("arch=")]
        r = subprocess.run(cmd + [tmp], capture_output=True, text=True)
        if r.returncode:
            die(f"{name}: nvcc failed:\n{r.stderr}")
        regs = [ln.split(":", 1)[1].strip() for ln in r.stderr.splitlines() if "registers" in ln]
        print(f"{name}: {os.path.join(outdir, name + '.cubin')} ({regs[0] if regs else '?'})")


def run(mode, kernels, shapes):
    import torch
    import torch.nn.functional as F
    cu = ctypes.CDLL("libcuda.so.1")

    def ck(r, what):
        if r != 0:
            die(f"{what}: CUresult {r}")

    class Args(ctypes.Structure):          # ak_cuda_args_t (kernels/ak_kernel_cuda.h)
        _fields_ = [("dims", ctypes.c_int64 * 8), ("ndims", ctypes.c_int), ("inp", ctypes.c_void_p * 8),
                    ("nin", ctypes.c_int), ("out", ctypes.c_void_p * 8), ("nout", ctypes.c_int)]
    if ctypes.sizeof(Args) != 216:
        die("ak_cuda_args_t layout changed")
    torch.zeros(1, device="cuda")          # the primary context, current on this thread
    fns = []
    for spec in kernels.split(","):
        name, path, cand, params = parse_kernel(spec)
        m, f = ctypes.c_void_p(), ctypes.c_void_p()
        ck(cu.cuModuleLoad(ctypes.byref(m), path.encode()), f"cuModuleLoad {path}")
        ck(cu.cuModuleGetFunction(ctypes.byref(f), m, b"ak_kernel"), f"{path}: ak_kernel")
        # the block's opt-in limit (227 KiB on sm_90) less the kernel's static shared memory
        static = ctypes.c_int()
        ck(cu.cuFuncGetAttribute(ctypes.byref(static), 1, f), "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES")
        ck(cu.cuFuncSetAttribute(f, 8, 227 * 1024 - static.value), "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES")
        fns.append((name, f, cand, params))

    cu.cuTensorMapEncodeTiled.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                                          ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                          ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    codes = {"swizzle": {"none": 0, "32B": 1, "64B": 2, "128B": 3},
             "l2": {"none": 0, "64B": 1, "128B": 2, "256B": 3}, "oob": {"zero": 0, "nan": 1}}

    def encode(t, dims, box, swz, l2, oob):
        """A CUtensorMap (128 bytes, 64-byte aligned) over tensor t, bfloat16,
        row-major: dims innermost first, strides their running products;
        returns (keep-alive buffer, its aligned address)."""
        rank, raw = len(dims), (ctypes.c_uint8 * 192)()
        at = ctypes.addressof(raw) + (-ctypes.addressof(raw)) % 64
        strides, run = [], 2
        for d in dims[:-1]:
            run *= d
            strides.append(run)
        ck(cu.cuTensorMapEncodeTiled(at, 9, rank, t.data_ptr(), (ctypes.c_uint64 * rank)(*dims),
                                     (ctypes.c_uint64 * max(rank - 1, 1))(*strides),
                                     (ctypes.c_uint32 * rank)(*box), (ctypes.c_uint32 * rank)(*([1] * rank)),
                                     0, codes["swizzle"][swz], codes["l2"][l2], codes["oob"][oob]),
           f"cuTensorMapEncodeTiled dims {dims} box {box}")
        return raw, at

    def kernel_params(geom, shp, q, k, v, o):
        """The launch's parameter pointers, once a kernel and shape: the
        argument block, then the tensor maps; with what they point to."""
        a = Args()
        for i, x in enumerate(shp):
            a.dims[i] = x
        a.ndims, a.nin, a.nout = 7, 3, 1
        a.inp[0], a.inp[1], a.inp[2], a.out[0] = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr()
        bufs = {"q": q, "k_cache": k, "v_cache": v, "o": o}
        enc = [encode(bufs[m[0]], *m[1:]) for m in geom[3]]
        p = (ctypes.c_void_p * (1 + len(enc)))(ctypes.cast(ctypes.pointer(a), ctypes.c_void_p),
                                               *[ctypes.c_void_p(at) for _, at in enc])
        return p, (a, enc)

    def launch(f, geom, p):
        grid, block, sh, _ = geom
        ck(cu.cuLaunchKernel(f, *grid, *block, sh, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream),
                             p, None), "cuLaunchKernel")

    def timeit(fn, reps=15, per=20):
        st = torch.cuda.Stream()
        st.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(st):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(st)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(per):
                fn()
        g.replay()
        torch.cuda.synchronize()
        ts = []
        for _ in range(reps):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            g.replay()
            e.record()
            e.synchronize()
            ts.append(s.elapsed_time(e) * 1000 / per)
        return sorted(ts)[len(ts) // 2]

    torch.manual_seed(0)
    for sname in shapes.split(","):
        if sname not in SHAPES:
            die(f"unknown shape '{sname}' (have {', '.join(SHAPES)})")
        shp = SHAPES[sname]
        B, Q, HQ, HK, L, D, _ = shp
        q = torch.randn(B, HQ, Q, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(B, HK, L, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn_like(k)
        o = torch.empty_like(q)

        def sdpa():
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        ref = sdpa().float()
        line = [f"{sname}: sdpa {timeit(sdpa):.1f} us" if mode == "time" else sname]
        for name, f, cand, params in fns:
            geom = spec_launch(cand, shp, params)
            kp, _keep = kernel_params(geom, shp, q, k, v, o)

            def fn():
                launch(f, geom, kp)
            if mode == "ncu":
                fn()
                torch.cuda.synchronize()
                continue
            t = timeit(fn)
            line.append(f"{name} {t:.1f} (err {(o.float() - ref).abs().max().item():.3g})")
        print(" | ".join(line), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 2 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
    elif len(sys.argv) >= 3 and sys.argv[1] == "build":
        build(sys.argv[2], sys.argv[3:])
    elif len(sys.argv) == 4 and sys.argv[1] in ("time", "ncu"):
        run(sys.argv[1], sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
