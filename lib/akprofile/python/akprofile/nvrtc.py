"""Compiling an entry with NVRTC (libnvrtc opened with ctypes) into a CUBIN
cache keyed as akfleet's worker keys its own (worker/backend_cuda.c:
ak_cuda_cache_key): SHA-256 over length-prefixed parts

    "akfleet-cuda-1", sha256(prelude), source, options (one per line),
    "sm_XY", NVRTC "major.minor", sha256(cuda_fp16.h cuda_fp16.hpp
    cuda_bf16.h cuda_bf16.hpp) when those headers are used, else ""

and NVRTC sees the same text (the prelude under #line 1 "ak_kernel_cuda.h",
the kernel under #line 1 "kernel.cu") with the worker's options:
--gpu-architecture=sm_XY --std=c++17 [--include-path=DIR -DAK_CUDA_HALF=1]
then akp_compile_options (the dtype define and the tuned parameters).
The cache is $AKPROFILE_CACHE, else ~/.cache/akprofile/cubin; writes are
atomic (temporary file, rename), a cached file that is not an ELF CUBIN is
rebuilt.
"""
import ctypes
import glob
import hashlib
import os
import sys
import tempfile
import threading

from .profile import Unavailable, AkpError
from ._lib import AKP_EUNAVAIL, AKP_EINVAL

_HALF_HEADERS = ("cuda_fp16.h", "cuda_fp16.hpp", "cuda_bf16.h", "cuda_bf16.hpp")
_lock = threading.Lock()
_nv = None


class CompileError(AkpError):
    """NVRTC refused the source: .log holds its log."""
    def __init__(self, message, log=""):
        super().__init__(AKP_EINVAL, message)
        self.log = log


def _wheel_dirs(sub):
    """<site-packages>/nvidia/*/<sub> folders (CUDA pip wheels, e.g. PyTorch's)."""
    out = []
    for p in sys.path:
        if p and os.path.isdir(os.path.join(p, "nvidia")):
            out += sorted(glob.glob(os.path.join(p, "nvidia", "*", sub)))
    return out


def _nvrtc_candidates():
    env = os.environ.get("AKPROFILE_NVRTC")
    if env:
        return [env]
    names = ["libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"]
    out = list(names)
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    for r in roots:
        if r:
            out += [os.path.join(r, "lib64", n) for n in names]
    for d in _wheel_dirs("lib"):
        out += [os.path.join(d, n) for n in names]
    return out


class _Nvrtc:
    def __init__(self, handle, path):
        self.h = handle
        self.path = path
        P = ctypes.c_void_p
        h = handle
        h.nvrtcVersion.argtypes = [ctypes.POINTER(ctypes.c_int)] * 2
        h.nvrtcCreateProgram.argtypes = [ctypes.POINTER(P), ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int,
                                         P, P]
        h.nvrtcCompileProgram.argtypes = [P, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
        h.nvrtcGetProgramLogSize.argtypes = [P, ctypes.POINTER(ctypes.c_size_t)]
        h.nvrtcGetProgramLog.argtypes = [P, ctypes.c_char_p]
        h.nvrtcGetCUBINSize.argtypes = [P, ctypes.POINTER(ctypes.c_size_t)]
        h.nvrtcGetCUBIN.argtypes = [P, ctypes.c_char_p]
        h.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(P)]
        h.nvrtcGetErrorString.argtypes = [ctypes.c_int]
        h.nvrtcGetErrorString.restype = ctypes.c_char_p
        a, b = ctypes.c_int(), ctypes.c_int()
        if h.nvrtcVersion(ctypes.byref(a), ctypes.byref(b)) != 0:
            raise Unavailable(AKP_EUNAVAIL, "%s: nvrtcVersion failed" % path)
        self.version = "%d.%d" % (a.value, b.value)

    def error(self, rc):
        s = self.h.nvrtcGetErrorString(rc)
        return s.decode() if s else "NVRTC error %d" % rc


def load():
    """libnvrtc, opened once with RTLD_GLOBAL (so libakprofile's own dlopen
    by soname finds the same copy).  Raises Unavailable naming what was tried."""
    global _nv
    with _lock:
        if _nv is None:
            tried = []
            for path in _nvrtc_candidates():
                try:
                    h = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                except OSError:
                    tried.append(path)
                    continue
                _nv = _Nvrtc(h, path)
                break
            if _nv is None:
                raise Unavailable(AKP_EUNAVAIL, "no NVRTC (set AKPROFILE_NVRTC); tried " + ", ".join(tried))
    return _nv


def include_dir():
    """(folder, digest of its half-precision headers) as the worker finds
    them, or (None, "")."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    dirs = [os.path.join(r, "include") for r in roots if r] + _wheel_dirs("include")
    for d in dirs:
        h = hashlib.sha256()
        try:
            for f in _HALF_HEADERS:
                with open(os.path.join(d, f), "rb") as fh:
                    h.update(fh.read())
        except OSError:
            continue
        return d, h.hexdigest()
    return None, ""


def _part(h, data):
    if isinstance(data, str):
        data = data.encode()
    h.update(b"%d:" % len(data))
    h.update(data)


def cache_key(source, prelude, options, arch, nvrtc_version, headers_digest):
    """The worker's key (ak_cuda_cache_key) for this build: 64 hex digits."""
    h = hashlib.sha256()
    _part(h, "akfleet-cuda-1")
    _part(h, hashlib.sha256(prelude.encode()).hexdigest())
    _part(h, source)
    for p in ("\n".join(options), arch, nvrtc_version, headers_digest):
        _part(h, p)
    return h.hexdigest()


def build_options(kernel, arch, inc):
    """The full NVRTC option list for kernel on arch with the include folder inc (or None)."""
    opts = ["--gpu-architecture=%s" % arch, "--std=c++17"]
    if inc:
        opts += ["--include-path=%s" % inc, "-DAK_CUDA_HALF=1"]
    elif kernel.dtype != "float32":
        raise CompileError("%s kernels need the toolkit's cuda_fp16.h and cuda_bf16.h: none under $CUDA_HOME/include, "
                           "/usr/local/cuda/include or a pip wheel's nvidia/*/include" % kernel.dtype)
    return opts + kernel.compile_options()


def source_text(kernel):
    """What NVRTC compiles: the worker's layout."""
    return '#line 1 "ak_kernel_cuda.h"\n%s\n#line 1 "kernel.cu"\n%s' % (kernel.prelude, kernel.source)


def cache_dir():
    d = os.environ.get("AKPROFILE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "akprofile", "cubin")
    os.makedirs(d, exist_ok=True)
    return d


def compile_kernel(kernel, arch):
    """CUBIN bytes of kernel for arch ("sm_90"), from the cache or NVRTC.
    Returns (cubin, key, cached)."""
    nv = load()
    inc, hdr = include_dir()
    opts = build_options(kernel, arch, inc)
    key = cache_key(kernel.source, kernel.prelude, opts, arch, nv.version, hdr if inc else "")
    d = cache_dir()
    path = os.path.join(d, key + ".cubin")
    try:
        with open(path, "rb") as f:
            data = f.read()
        if data[:4] == b"\x7fELF":
            return data, key, True
    except OSError:
        pass
    prog = ctypes.c_void_p()
    rc = nv.h.nvrtcCreateProgram(ctypes.byref(prog), source_text(kernel).encode(),
                                 (kernel.source_name or "kernel.cu").encode(), 0, None, None)
    if rc != 0:
        raise CompileError("nvrtcCreateProgram: %s" % nv.error(rc))
    try:
        argv = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        rc = nv.h.nvrtcCompileProgram(prog, len(opts), argv)
        if rc != 0:
            n = ctypes.c_size_t(0)
            nv.h.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
            log = ctypes.create_string_buffer(n.value + 1)
            nv.h.nvrtcGetProgramLog(prog, log)
            text = log.value.decode("utf-8", "replace")
            raise CompileError("NVRTC %s could not compile %s (%s): %s\n%s"
                               % (nv.version, kernel.source_name, kernel.candidate, nv.error(rc), text), text)
        n = ctypes.c_size_t(0)
        rc = nv.h.nvrtcGetCUBINSize(prog, ctypes.byref(n))
        if rc != 0 or n.value == 0:
            raise CompileError("nvrtcGetCUBINSize: %s" % nv.error(rc))
        buf = ctypes.create_string_buffer(n.value)
        rc = nv.h.nvrtcGetCUBIN(prog, buf)
        if rc != 0:
            raise CompileError("nvrtcGetCUBIN: %s" % nv.error(rc))
        data = buf.raw
    finally:
        nv.h.nvrtcDestroyProgram(ctypes.byref(prog))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".build-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
    return data, key, False
