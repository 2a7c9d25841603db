"""Loading compiled entries and launching them on a caller's stream
through the CUDA driver API (libcuda opened with ctypes).

The launch itself is libakprofile's (akp_launch: the ABI's argument block,
the entry's grid, block and dynamic shared memory), so the layout of
ak_cuda_args_t is written once, in C.  Here: the context (the current one,
else device `ordinal`'s primary context, which is PyTorch's too), the
module per (context, CUBIN key) and the function in it.

A failed launch raises LaunchError naming the CUDA error; callers fall
back for that entry.  Errors from a kernel that already ran (an illegal
address) surface at the next synchronization, in whoever synchronizes, and
poison the context: nothing here can fall back from those.
"""
import ctypes
import threading

from . import _lib, nvrtc
from .profile import AkpError, Unavailable
from ._lib import AKP_OK, AKP_EUNAVAIL, AKP_ELAUNCH

_drv = None
_drv_lock = threading.Lock()


class LaunchError(AkpError):
    """A CUDA call failed: .cuda_error is its name ("CUDA_ERROR_INVALID_VALUE")."""
    def __init__(self, message, cuda_error=""):
        super().__init__(AKP_ELAUNCH, message)
        self.cuda_error = cuda_error


def _driver():
    global _drv
    with _drv_lock:
        if _drv is None:
            try:
                h = ctypes.CDLL("libcuda.so.1")
            except OSError as e:
                raise Unavailable(AKP_EUNAVAIL, "no CUDA driver: %s" % e)
            P = ctypes.c_void_p
            h.cuInit.argtypes = [ctypes.c_uint]
            h.cuCtxGetCurrent.argtypes = [ctypes.POINTER(P)]
            h.cuCtxSetCurrent.argtypes = [P]
            h.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
            h.cuDevicePrimaryCtxRetain.argtypes = [ctypes.POINTER(P), ctypes.c_int]
            h.cuModuleLoadData.argtypes = [ctypes.POINTER(P), ctypes.c_char_p]
            h.cuModuleGetFunction.argtypes = [ctypes.POINTER(P), P, ctypes.c_char_p]
            h.cuGetErrorName.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
            _drv = h
    return _drv


def _name(h, rc):
    s = ctypes.c_char_p()
    if h.cuGetErrorName(rc, ctypes.byref(s)) == 0 and s.value:
        return s.value.decode()
    return "CUDA_ERROR_%d" % rc


def _check(h, rc, call):
    if rc != 0:
        name = _name(h, rc)
        raise LaunchError("%s: %s (%d)" % (call, name, rc), name)


def _fkey(ctx, kernel):
    return (ctx, kernel.key, kernel.candidate, tuple(kernel.params), kernel.source_digest)


class Launcher:
    """Compiles (nvrtc.compile_kernel), loads and launches entries of a
    Runtime's device.  Functions are kept per (context, CUBIN key); one
    Launcher may be used from several threads."""

    def __init__(self, runtime):
        if runtime.device is None:
            raise Unavailable(AKP_EUNAVAIL, "the runtime has no CUDA device (%s)" % (runtime.why_not or
                                                                                    "a class string was given"))
        self.runtime = runtime
        self.arch = runtime.device.arch
        self._fns = {}                 # (ctx, id(kernel ptr)) -> (function, keepalive)
        self._lock = threading.Lock()
        self._tls = threading.local()  # per thread: the current-context probe and its Plans
        self._get_ctx = None
        self.compiled = 0              # NVRTC runs (cache misses)
        self.cached = 0                # CUBINs found in the cache

    def _context(self):
        h = _driver()
        ctx = ctypes.c_void_p()
        _check(h, h.cuInit(0), "cuInit")
        _check(h, h.cuCtxGetCurrent(ctypes.byref(ctx)), "cuCtxGetCurrent")
        if not ctx.value:
            dev = ctypes.c_int()
            _check(h, h.cuDeviceGet(ctypes.byref(dev), self.runtime.ordinal), "cuDeviceGet")
            _check(h, h.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev.value), "cuDevicePrimaryCtxRetain")
            _check(h, h.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
        return ctx.value

    def is_loaded(self, kernel):
        """True when kernel's function is loaded in the current context (a
        launch will not compile or load anything)."""
        try:
            h = _driver()
        except Unavailable:
            return False
        ctx = ctypes.c_void_p()
        if h.cuCtxGetCurrent(ctypes.byref(ctx)) != 0:
            return False
        return _fkey(ctx.value, kernel) in self._fns

    def prepare(self, kernel):
        """The CUfunction of kernel in the current context (compiling and
        loading it the first time).  Raises nvrtc.CompileError or LaunchError."""
        ctx = self._context()
        fkey = _fkey(ctx, kernel)
        with self._lock:
            got = self._fns.get(fkey)
            if got:
                return got
            if kernel.backend != "cuda":
                raise LaunchError("%s (%s) is a %s entry: not launched on a GPU" % (kernel.key, kernel.candidate,
                                                                                   kernel.backend))
            # an arch-specific entry ("sm_90a") builds for its own target;
            # the profile matched this device's compute capability already
            cubin, key, cached = nvrtc.compile_kernel(kernel, kernel.arch or self.arch)
            if cached:
                self.cached += 1
            else:
                self.compiled += 1
            h = _driver()
            mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
            _check(h, h.cuModuleLoadData(ctypes.byref(mod), cubin), "cuModuleLoadData")
            _check(h, h.cuModuleGetFunction(ctypes.byref(fn), mod, kernel.entry.encode()),
                   "cuModuleGetFunction (%s)" % kernel.entry)
            self._fns[fkey] = fn.value     # modules stay loaded for the process
            return fn.value

    def plan(self, kernel):
        """kernel's Plan for this thread and the current context (made, and
        the kernel compiled and loaded, the first time)."""
        tls = self._tls
        if self._get_ctx is None:
            self._get_ctx = _driver().cuCtxGetCurrent
        ctxref = getattr(tls, "ctxref", None)
        if ctxref is None:
            tls.ctx = ctypes.c_void_p()
            tls.ctxref = ctxref = ctypes.byref(tls.ctx)
            tls.plans = {}
        if self._get_ctx(ctxref) != 0:
            self._context()              # names the error
        key = (tls.ctx.value, id(kernel))
        p = tls.plans.get(key)
        if p is None or p.kernel is not kernel:
            p = tls.plans[key] = Plan(self, kernel)
        return p

    def launch_ptrs(self, kernel, ptrs, stream=0):
        """The hot path: kernel's Plan launched with device pointers ptrs
        (its inputs, then its outputs, in the entry's order) on stream.
        Raises LaunchError naming the CUDA error."""
        self.plan(kernel).launch(ptrs, stream)

    def launch(self, kernel, inputs, outputs, stream=0):
        """Launches kernel on stream (a CUstream handle as int; 0 the legacy
        default stream) with device pointers inputs / outputs in the entry's
        order: launch_ptrs with the counts checked apart.  Asynchronous.
        Raises LaunchError naming the CUDA error."""
        if len(inputs) != len(kernel.inputs) or len(outputs) != len(kernel.outputs):
            raise LaunchError("%s (%s): %d inputs and %d outputs given, the entry has %d and %d"
                              % (kernel.op, kernel.candidate, len(inputs), len(outputs), len(kernel.inputs),
                                 len(kernel.outputs)))
        self.launch_ptrs(kernel, list(inputs) + list(outputs), stream)


class Plan:
    """One entry's launch, prepared once per thread and context: the
    function (compiled and loaded by the Launcher), the argument block
    filled once by akp_launch_args with the entry's dims, and views on the
    block's pointer slots (where akp_launch_prepare says they are).  A
    launch writes the pointers and calls akp_launch_block: what is left
    per call is a few stores and one foreign call (docs/apply.md, "What a
    routed call costs").  Not shared between threads (the block is
    written per call)."""

    __slots__ = ("kernel", "fn", "block", "slots", "_call", "_kptr", "n")

    def __init__(self, launcher, kernel):
        lib = _lib.lib()
        self.kernel = kernel
        self.fn = launcher.prepare(kernel)
        nin, nout = len(kernel.inputs), len(kernel.outputs)
        self.n = nin + nout
        rc = ctypes.c_int(0)
        err = ctypes.create_string_buffer(1024)
        in_off, out_off = ctypes.c_size_t(0), ctypes.c_size_t(0)
        r = lib.akp_launch_prepare(kernel._ptr, self.fn, ctypes.byref(in_off), ctypes.byref(out_off),
                                   ctypes.byref(rc), err, len(err))
        if r == AKP_ELAUNCH:
            raise LaunchError(_lib.text(err), _name(_driver(), rc.value))
        if r != AKP_OK:
            raise LaunchError(_lib.text(err))
        self.block = (ctypes.c_ubyte * _lib.AKP_ARGS_BYTES)()
        ones_in = (ctypes.c_uint64 * max(1, nin))(*([1] * nin))     # placeholders: not null
        ones_out = (ctypes.c_uint64 * max(1, nout))(*([1] * nout))
        r = lib.akp_launch_args(kernel._ptr, ones_in, nin, ones_out, nout, self.block, len(self.block), err,
                                len(err))
        if r != AKP_OK:
            raise LaunchError(_lib.text(err))
        self.slots = ([ctypes.c_uint64.from_buffer(self.block, in_off.value + 8 * i) for i in range(nin)] +
                      [ctypes.c_uint64.from_buffer(self.block, out_off.value + 8 * i) for i in range(nout)])
        self._call = lib.akp_launch_block
        self._kptr = kernel._ptr

    def launch(self, ptrs, stream=0):
        """Asynchronous; LaunchError names the CUDA error (a null pointer
        or a count that is not the entry's is refused before the call)."""
        if len(ptrs) != self.n or not all(ptrs):
            k = self.kernel
            raise LaunchError("%s (%s): %d pointers given (%s), the entry takes %d inputs and %d outputs, none 0"
                              % (k.key, k.candidate, len(ptrs), ", ".join(hex(p) for p in ptrs),
                                 len(k.inputs), len(k.outputs)))
        for slot, p in zip(self.slots, ptrs):
            slot.value = p
        r = self._call(self._kptr, self.fn, stream or None, self.block)
        if r:
            k = self.kernel
            name = _name(_driver(), r)
            raise LaunchError("cuLaunchKernel: %s (%d) for %s %s (%s)" % (name, r, k.op, k.key, k.candidate), name)
