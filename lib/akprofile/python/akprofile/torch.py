"""Route PyTorch calls through an akfleet profile (imports torch).

    import akprofile.torch as akt
    applied = akt.enable("/path/to/package", ops=["rms_norm", "softmax"])
    model(x)                     # matching calls run the tuned kernels
    applied.report()             # also printed at exit; JSON to $AKPROFILE_REPORT

The route: enable() replaces a few Python attributes (restored by
disable()/deactivate()): torch.nn.functional.{softmax, rms_norm, layer_norm,
cross_entropy, linear, scaled_dot_product_attention}, torch.softmax,
Tensor.softmax, torch.matmul, Tensor.__matmul__, and, when transformers'
Llama is imported, LlamaRMSNorm.forward and LlamaMLP.forward (HF's RMSNorm
does not call F.rms_norm, and its MLP is the catalog's fused_mlp).  Rotary
embedding has no PyTorch function to replace: call rotary_embedding(x).

Only operators the profile has an entry for on this device's class are
wrapped: the others keep PyTorch's own function, untouched, and the report
lists them as not routed (with the reason: no entry for the class, or the
profile does not apply to this device).  A routed call looks its (operator,
shape, dtype) up first (memoised: decided once per shape), so a shape
without an entry falls back before any argument is checked or weight
transposed.

A call takes the profile only when an entry matches exactly: operator,
every dimension, dtype; the tensors contiguous (unless copy=True), on the
runtime's GPU, of one dtype, needing no autograd; and the arguments within
what the catalog kernel computes (eps 1e-6 for rms_norm and 1e-5 for
layer_norm, both affine tensors given, softmax over the last dim, SDPA
without mask or dropout and with the default scale ...).  SDPA with equal
q, k, v shapes is flash_attention; with fewer queries than keys (decode
over a KV cache) or grouped KV heads it is split_kv_attention, whose
kernel keeps its partials in a module-scope workspace: one entry must not
run on two streams at once.
Otherwise PyTorch's own function runs and the reason is counted.

torch.compile: while Dynamo traces, every wrapper calls PyTorch's function,
so compiled regions hold PyTorch's/Inductor's kernels and the profile
applies only to eager code; calls inside compiled code are not counted.
CUDA graphs: a wrapper runs at capture; an entry already loaded (run one
eager step first) is launched on the capturing stream and so captured, one
that is not loaded falls back ("CUDA graph capture: ..."), as does
cross_entropy (its target check synchronizes); counts are of captures, not
replays.
"""
import atexit
import math
import os
import sys
import threading
import weakref

import torch
import torch.nn.functional as F

from .profile import Runtime
from .cuda import Launcher
from .router import Router, Counters, Skip

# user-facing names -> the catalog's operator names (kernels/*/spec.json)
OPS = {"rms_norm": ("rmsnorm",), "layer_norm": ("layernorm",), "softmax": ("softmax",),
       "cross_entropy": ("cross_entropy",), "rotary": ("rotary_embedding",), "matmul": ("matmul",),
       "linear": ("matmul",), "fused_mlp": ("fused_mlp",),
       "scaled_dot_product_attention": ("flash_attention", "split_kv_attention")}
_CATALOG = set(op for ops in OPS.values() for op in ops)
_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}


def _skip(reason):
    raise Skip(reason)


def _compiling_fn():
    fn = getattr(getattr(torch, "compiler", None), "is_compiling", None)
    if fn is None:
        fn = getattr(getattr(torch, "_dynamo", None), "is_compiling", None)
    return fn or (lambda: False)


_compiling = _compiling_fn()


_is_capturing = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None) or torch.cuda.is_current_stream_capturing
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None)
_cuda_ok = None


def _capturing():
    """True while the current CUDA stream is capturing a graph."""
    global _cuda_ok
    if _cuda_ok is None:
        _cuda_ok = torch.cuda.is_available()
    return _cuda_ok and _is_capturing()


def _stream(device):
    """The current stream of device as a CUstream handle (int)."""
    if _raw_stream is not None:
        return _raw_stream(device.index if device.index is not None else torch.cuda.current_device())
    return torch.cuda.current_stream(device).cuda_stream


class Applied:
    """What enable() returns: the router, its counters and the switch."""

    def __init__(self, runtime, ops, copy, transpose_weights, report_path, print_at_exit):
        self.runtime = runtime
        self.router = Router(runtime, Counters())
        # only operators with an entry for this class get a wrapper
        have = runtime.ops_with_entries()
        vendor = runtime.vendor_ops()
        asked = ops if ops is not None else _CATALOG
        self.unrouted = {}
        for op in sorted(asked):
            if op not in have:
                self.unrouted[op] = (runtime.why_not if not runtime.applies else
                                     "the profile keeps the vendor library for every entry of %s on %s "
                                     "(vendor entries)" % (op, runtime.device_class) if op in vendor else
                                     "the profile has no entry for %s on %s" % (op, runtime.device_class))
        ops = set(asked) & have
        self.counters = self.router.counters
        self.launcher = Launcher(runtime) if runtime.device is not None else None
        self.ops = ops
        self.copy = copy
        self.transpose_weights = transpose_weights
        self.report_path = report_path
        self.active = False
        self._saved = []
        self._wt = {}                  # id(weight) -> (weakref, version, transposed copy)
        self._print = print_at_exit
        atexit.register(self._at_exit)

    # ------------------------------------------------------------ switch
    def activate(self):
        """Installs the wrappers (idempotent)."""
        global _current
        if self.active:
            return
        if _current is not None and _current is not self:
            _current.deactivate()
        for owner, name, wrapper in _patches(self):
            own = name in owner.__dict__
            self._saved.append((owner, name, own, owner.__dict__.get(name)))
            setattr(owner, name, wrapper)
        self.active = True
        _current = self

    def deactivate(self):
        """Restores PyTorch's functions exactly (no wrapper left in the path)."""
        global _current
        for owner, name, own, orig in reversed(self._saved):
            if own:
                setattr(owner, name, orig)
            else:
                delattr(owner, name)   # it was inherited (Tensor.softmax from TensorBase)
        self._saved = []
        self.active = False
        if _current is self:
            _current = None

    disable = deactivate

    # ------------------------------------------------------------ report
    def report(self, out=None):
        self.counters.report(out, title="akprofile %s on %s" % (self.runtime.profile.name,
                                                               self.runtime.device_class or "no device"))
        for op, why in sorted(self.unrouted.items()):
            print("  %-28s not routed (PyTorch's own, no wrapper): %s" % (op, why), file=out or sys.stderr)

    def to_json(self):
        doc = self.counters.to_json()
        doc.update({"profile": self.runtime.profile.name, "package": self.runtime.profile.path,
                    "device_class": self.runtime.device_class, "applies": self.runtime.applies,
                    "why_not": self.runtime.why_not, "broken": sorted(set(self.router.broken.values())),
                    "unrouted": [{"op": op, "reason": why} for op, why in sorted(self.unrouted.items())]})
        return doc

    def write_json(self, path):
        import json
        with open(path, "w") as f:
            json.dump(self.to_json(), f, indent=1, sort_keys=True)
            f.write("\n")

    def _at_exit(self):
        try:
            if self._print:
                self.report()
            if self.report_path:
                self.write_json(self.report_path)
        except Exception as e:          # never turn a program's exit into a crash
            print("akprofile: the report could not be written: %s" % e, file=sys.stderr)

    # ----------------------------------------------------------- helpers
    def wants(self, catalog_op):
        return catalog_op in self.ops

    def miss(self, catalog_op, dims, dtype):
        """True when no entry matches (op, dims, dtype): the memoised lookup,
        before any argument check, so a shape without an entry costs one
        dictionary probe and its count."""
        return not self.router.lookup(catalog_op, dims, _DTYPES.get(dtype, str(dtype)))

    def check(self, tensors, dtype=None):
        """None when the tensors can go to a kernel, else the reason.
        Returns (reason, tensors made contiguous when copy is on)."""
        if self.launcher is None:
            return "no CUDA device: %s" % (self.runtime.why_not or "the runtime was given a class string"), tensors
        ordinal = self.runtime.ordinal
        out = []
        for t in tensors:
            if not isinstance(t, torch.Tensor):
                return "an argument is not a tensor", tensors
            if t.get_device() != ordinal:          # -1 for a CPU tensor
                if not t.is_cuda:
                    return "a tensor is on %s, not a CUDA device" % t.device, tensors
                return "tensors on %s, the profile's runtime is on cuda:%d" % (t.device, ordinal), tensors
            if dtype is not None and t.dtype != dtype:
                return "mixed dtypes (%s and %s)" % (dtype, t.dtype), tensors
            if t.dtype not in _DTYPES:
                return "dtype %s is not a catalog dtype" % t.dtype, tensors
            if t.requires_grad and torch.is_grad_enabled():
                return "autograd: the tuned kernel has no backward (run under torch.no_grad or inference_mode)", tensors
            if not t.is_contiguous():
                if not self.copy:
                    return "non-contiguous %s tensor (strides %s)" % ("x".join(map(str, t.shape)),
                                                                     ",".join(map(str, t.stride()))), tensors
                t = t.contiguous()
            out.append(t)
        return None, out

    def transposed(self, w):
        """w.t().contiguous(), cached per weight while it lives and is not
        changed in place (its version counter)."""
        try:
            version = w._version
        except RuntimeError:            # an inference tensor: no version counter
            version = -1
        got = self._wt.get(id(w))
        if got is not None and got[0]() is w and got[1] == version:
            return got[2]
        if _capturing():
            _skip("CUDA graph capture: the transposed weight was not made before capture")
        wt = w.t().contiguous()
        self._wt[id(w)] = (weakref.ref(w), version, wt)
        return wt

    def run(self, kernel, inputs, out_shapes, dtype, device):
        """Launches kernel on the current stream of device; returns the
        output tensors (fresh, of out_shapes)."""
        for t, (_, count) in zip(inputs, kernel.inputs):
            if t.numel() != count:
                _skip("the entry's %s has %d elements, the call's %d" % (kernel.key, count, t.numel()))
        if len(inputs) != len(kernel.inputs) or len(out_shapes) != len(kernel.outputs):
            _skip("the entry %s has %d inputs and %d outputs, the call maps %d and %d"
                  % (kernel.key, len(kernel.inputs), len(kernel.outputs), len(inputs), len(out_shapes)))
        if _is_capturing() and not self.launcher.is_loaded(kernel):
            _skip("CUDA graph capture: the entry was not loaded before capture (run a step eagerly first)")
        if kernel.tensor_maps:
            for t in inputs:
                if t.data_ptr() % 16:
                    _skip("the entry %s takes TMA tensor maps, which need 16-byte aligned buffers: an input is "
                          "at 0x%x" % (kernel.key, t.data_ptr()))
        outs = [torch.empty(s, dtype=dtype, device=device) for s in out_shapes]
        for o, (_, count) in zip(outs, kernel.outputs):
            if o.numel() != count:
                _skip("the entry's output has %d elements, the call's %d" % (count, o.numel()))
        self.launcher.launch_ptrs(kernel, [t.data_ptr() for t in inputs] + [o.data_ptr() for o in outs],
                                  _stream(device))
        return outs

    def call(self, catalog_op, dims, dtype, launch, fallback, reason=None):
        """Router.dispatch for a catalog operator this Applied routes.  A
        call of the same operator made by PyTorch's own fallback (F.softmax
        calls Tensor.softmax) passes straight through: one call, one count."""
        inside = _tls.__dict__.setdefault("inside", set())
        if not self.wants(catalog_op) or catalog_op in inside:
            return fallback()

        def fb():
            inside.add(catalog_op)
            try:
                return fallback()
            finally:
                inside.discard(catalog_op)
        return self.router.dispatch(catalog_op, dims, _DTYPES.get(dtype, str(dtype)), launch, fb, reason)


_current = None
_tls = threading.local()


# ------------------------------------------------------------------ ops
def _softmax(a, orig, x, dim, dtype, args, kwargs):
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.numel() == 0:
        return orig(*args, **kwargs)
    cols = x.shape[-1]
    dims = [x.numel() // cols, cols]
    fb = lambda: orig(*args, **kwargs)  # noqa: E731
    if a.miss("softmax", dims, x.dtype):
        return a.call("softmax", dims, x.dtype, None, fb)
    reason = None
    if dim is None or (dim % x.dim()) != x.dim() - 1:
        reason = "softmax over dim %s: the kernel normalizes the last dim" % dim
    elif dtype is not None and dtype != x.dtype:
        reason = "softmax with dtype=%s: the kernel keeps the input's dtype" % dtype
    else:
        reason, (xc,) = a.check([x])

    def launch(k):
        (y,) = a.run(k, [xc], [x.shape], x.dtype, x.device)
        return y
    return a.call("softmax", dims, x.dtype, launch, fb, reason)


def _rms_norm_core(a, x, n, weight, eps, fallback):
    dims = [x.numel() // n if n else 0, n]
    if a.miss("rmsnorm", dims, x.dtype):
        return a.call("rmsnorm", dims, x.dtype, None, fallback)
    reason = None
    if weight is None:
        reason = "rms_norm without weight: the kernel takes one"
    elif eps is None or float(eps) != 1e-6:
        reason = "rms_norm eps=%s: the kernel's eps is 1e-6" % eps
    elif tuple(weight.shape) != (n,):
        reason = "rms_norm weight of shape %s" % (tuple(weight.shape),)
    else:
        reason, ts = a.check([x, weight], x.dtype)

    def launch(k):
        (y,) = a.run(k, ts, [x.shape], x.dtype, x.device)
        return y
    return a.call("rmsnorm", dims, x.dtype, launch, fallback, reason)


def _layer_norm(a, orig, args, kwargs):
    names = ("input", "normalized_shape", "weight", "bias", "eps")
    v = dict(zip(names, args))
    v.update(kwargs)
    x, shape = v.get("input"), v.get("normalized_shape")
    w, b, eps = v.get("weight"), v.get("bias"), v.get("eps", 1e-5)
    if not isinstance(x, torch.Tensor) or x.numel() == 0:
        return orig(*args, **kwargs)
    shape = tuple(shape) if isinstance(shape, (list, tuple, torch.Size)) else (shape,)
    n = x.shape[-1] if x.dim() else 0
    dims = [x.numel() // n if n else 0, n]
    if a.miss("layernorm", dims, x.dtype):
        return a.call("layernorm", dims, x.dtype, None, lambda: orig(*args, **kwargs))
    reason = None
    if len(shape) != 1 or shape[0] != n:
        reason = "layer_norm over %s: the kernel normalizes the last dim only" % (shape,)
    elif w is None or b is None:
        reason = "layer_norm without weight or bias: the kernel takes both"
    elif float(eps) != 1e-5:
        reason = "layer_norm eps=%s: the kernel's eps is 1e-5" % eps
    else:
        reason, ts = a.check([x, w, b], x.dtype)

    def launch(k):
        (y,) = a.run(k, ts, [x.shape], x.dtype, x.device)
        return y
    return a.call("layernorm", dims, x.dtype, launch, lambda: orig(*args, **kwargs), reason)


def _ce_targets(batch, vocab, device):
    """The catalog kernel's targets: (uint32)(r * 2654435761) % vocab."""
    r = torch.arange(batch, dtype=torch.int64, device=device)
    return ((r * 2654435761) % (1 << 32)) % vocab


def _cross_entropy(a, orig, args, kwargs):
    names = ("input", "target", "weight", "size_average", "ignore_index", "reduce", "reduction", "label_smoothing")
    v = dict(zip(names, args))
    v.update(kwargs)
    x, t = v.get("input"), v.get("target")
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.numel() == 0:
        return orig(*args, **kwargs)
    batch, vocab = x.shape
    if a.miss("cross_entropy", [batch, vocab], x.dtype):
        return a.call("cross_entropy", [batch, vocab], x.dtype, None, lambda: orig(*args, **kwargs))
    reduction = v.get("reduction", "mean")
    ignore = v.get("ignore_index", -100)
    reason = None
    if v.get("weight") is not None or v.get("size_average") is not None or v.get("reduce") is not None:
        reason = "cross_entropy with class weights or legacy reduction arguments"
    elif float(v.get("label_smoothing", 0.0)) != 0.0:
        reason = "cross_entropy with label smoothing"
    elif reduction not in ("none", "mean", "sum"):
        reason = "cross_entropy reduction=%s" % reduction
    elif not isinstance(t, torch.Tensor) or t.dtype != torch.int64 or tuple(t.shape) != (batch,):
        reason = "cross_entropy targets are not class indices of shape (%d,)" % batch
    elif 0 <= ignore < vocab:
        reason = "cross_entropy ignore_index %d is a class" % ignore
    elif _capturing():
        reason = "CUDA graph capture: cross_entropy's target check synchronizes"
    else:
        reason, (xc,) = a.check([x])
        if reason is None and (t.device != x.device or not torch.equal(t, _ce_targets(batch, vocab, x.device))):
            reason = ("cross_entropy targets differ from the catalog kernel's ((r * 2654435761) mod 2^32 mod vocab): "
                      "it cannot take others")

    def launch(k):
        (loss,) = a.run(k, [xc], [(batch,)], x.dtype, x.device)
        return loss if reduction == "none" else loss.mean() if reduction == "mean" else loss.sum()
    return a.call("cross_entropy", [batch, vocab], x.dtype, launch, lambda: orig(*args, **kwargs), reason)


def _matmul_core(a, x, b_kn, fallback, bias=None, what="matmul"):
    """x [..., K] @ b_kn [K, N] (b_kn already contiguous [K, N] or None with a reason)."""
    k_dim = x.shape[-1]
    m = x.numel() // k_dim if k_dim else 0
    n = b_kn.shape[1] if isinstance(b_kn, torch.Tensor) and b_kn.dim() == 2 else 0
    dims = [m, n, k_dim]
    if a.miss("matmul", dims, x.dtype):
        return a.call("matmul", dims, x.dtype, None, fallback)
    reason, ts = a.check([x, b_kn] + ([bias] if bias is not None else []), x.dtype)

    def launch(k):
        (c,) = a.run(k, ts[:2], [tuple(x.shape[:-1]) + (n,)], x.dtype, x.device)
        if bias is not None:
            c.add_(ts[2])
        return c
    return a.call("matmul", dims, x.dtype, launch, fallback, reason)


def _matmul(a, orig, args, kwargs):
    x, b = (list(args) + [None, None])[:2]
    if "input" in kwargs or "other" in kwargs or "out" in kwargs or not isinstance(x, torch.Tensor) \
            or not isinstance(b, torch.Tensor):
        return orig(*args, **kwargs)
    if x.dim() < 2 or b.dim() != 2 or x.shape[-1] != b.shape[0] or x.numel() == 0 or b.numel() == 0:
        return a.call("matmul", [x.numel(), b.numel()], x.dtype, None, lambda: orig(*args, **kwargs),
                      "matmul of shapes %s and %s: the kernel takes [..., K] @ [K, N]"
                      % (tuple(x.shape), tuple(b.shape)))
    return _matmul_core(a, x, b, lambda: orig(*args, **kwargs))


def _linear(a, orig, args, kwargs):
    names = ("input", "weight", "bias")
    v = dict(zip(names, args))
    v.update(kwargs)
    x, w, bias = v.get("input"), v.get("weight"), v.get("bias")
    fb = lambda: orig(*args, **kwargs)  # noqa: E731
    if not isinstance(x, torch.Tensor) or not isinstance(w, torch.Tensor) or w.dim() != 2 or x.dim() < 1 \
            or x.numel() == 0 or x.shape[-1] != w.shape[1]:
        return orig(*args, **kwargs)
    n, k_dim = w.shape
    dims = [x.numel() // k_dim, n, k_dim]
    if a.miss("matmul", dims, x.dtype):
        return a.call("matmul", dims, x.dtype, None, fb)
    if not a.transpose_weights:
        return a.call("matmul", dims, x.dtype, None, fb,
                      "linear's weight is [N, K]: the catalog matmul takes [K, N] (enable with transpose_weights=True)")
    reason, ts = a.check([x, w] + ([bias] if bias is not None else []), x.dtype)
    if reason is None:
        try:
            wt = a.transposed(w)
        except Skip as e:
            reason = str(e)

    def launch(kern):
        (c,) = a.run(kern, [ts[0], wt], [tuple(x.shape[:-1]) + (n,)], x.dtype, x.device)
        if bias is not None:
            c.add_(ts[2])
        return c
    return a.call("matmul", dims, x.dtype, launch, fb, reason)


def _sdpa_arguments(v, D):
    """The reason SDPA's arguments are beyond both attention kernels, or None."""
    scale = v.get("scale")
    if v.get("attn_mask") is not None:
        return "scaled_dot_product_attention with attn_mask: the kernel takes none or causal"
    if float(v.get("dropout_p", 0.0)) != 0.0:
        return "scaled_dot_product_attention with dropout"
    if scale is not None and abs(float(scale) * math.sqrt(D) - 1.0) > 1e-9:
        return "scaled_dot_product_attention scale=%s: the kernel uses 1/sqrt(%d)" % (scale, D)
    return None


def _attention(a, op, dims, v, q, k, val, fb, shape_reason):
    """Both SDPA routes from the lookup on: the entry, the arguments, the
    shapes (shape_reason(): the reason they are beyond op's kernel, or
    None), the tensors, the launch."""
    if not a.wants(op) or a.miss(op, dims, q.dtype):
        return a.call(op, dims, q.dtype, None, fb)
    reason = _sdpa_arguments(v, q.shape[-1]) or shape_reason()
    if reason is None:
        reason, ts = a.check([q, k, val], q.dtype)

    def launch(kern):
        (o,) = a.run(kern, ts, [q.shape], q.dtype, q.device)
        return o
    return a.call(op, dims, q.dtype, launch, fb, reason)


def _sdpa_decode(a, v, q, k, val, fb):
    """SDPA with queries shorter than the keys, or grouped KV heads:
    split_kv_attention [B, Q, HQ, HK, L, D, mask] (q [B, HQ, Q, D], k and v
    [B, HK, L, D]: SDPA's layout).  Mask 1 (none); is_causal only with
    Q = L, where PyTorch's top-left diagonal is the kernel's bottom-right."""
    B, HQ, Q, D = q.shape
    HK, L = (k.shape[1], k.shape[2]) if k.dim() == 4 else (0, 0)
    causal = bool(v.get("is_causal", False))

    def shape_reason():
        if k.dim() != 4 or tuple(val.shape) != tuple(k.shape) or k.shape[0] != B or k.shape[3] != D:
            return ("scaled_dot_product_attention with q %s, k %s, v %s: the kernel takes k and v [B, HK, L, D]"
                    % (tuple(q.shape), tuple(k.shape), tuple(val.shape)))
        if HK == 0 or HQ % HK != 0:
            return "scaled_dot_product_attention with %d query heads over %d KV heads" % (HQ, HK)
        if HQ != HK and not v.get("enable_gqa", False):
            return "scaled_dot_product_attention with grouped KV heads and enable_gqa off (PyTorch refuses it)"
        if causal and Q != L:
            return ("scaled_dot_product_attention is_causal with %d queries over %d keys: PyTorch's diagonal is "
                    "top-left aligned, the kernel's bottom-right" % (Q, L))
        return None
    return _attention(a, "split_kv_attention", [B, Q, HQ, HK, L, D, 2 if causal else 1], v, q, k, val, fb,
                      shape_reason)


def _sdpa(a, orig, args, kwargs):
    names = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
    v = dict(zip(names, args))
    v.update(kwargs)
    q, k, val = v.get("query"), v.get("key"), v.get("value")
    fb = lambda: orig(*args, **kwargs)  # noqa: E731
    if not all(isinstance(t, torch.Tensor) for t in (q, k, val)) or q.dim() != 4:
        return orig(*args, **kwargs)
    if tuple(k.shape) != tuple(q.shape):
        return _sdpa_decode(a, v, q, k, val, fb)

    def shape_reason():
        if tuple(val.shape) != tuple(q.shape):
            return ("scaled_dot_product_attention with q and k %s, v %s: the kernel needs equal shapes"
                    % (tuple(q.shape), tuple(val.shape)))
        return None
    return _attention(a, "flash_attention", list(q.shape) + [2 if v.get("is_causal", False) else 1], v, q, k, val,
                      fb, shape_reason)


def _rotary_torch(x, base):
    """PyTorch's side of rotary_embedding: rotate-half, positions 0..S-1."""
    D = x.shape[-1]
    half = D // 2
    S = x.shape[-2]
    inv = base ** (-2.0 * torch.arange(half, dtype=torch.float64, device=x.device) / D)
    ang = torch.arange(S, dtype=torch.float64, device=x.device)[:, None] * inv[None, :]
    c, s = ang.cos().to(torch.float32), ang.sin().to(torch.float32)
    xf = x.to(torch.float32)
    x1, x2 = xf[..., :half], xf[..., half:2 * half]
    y = torch.cat([x1 * c - x2 * s, x2 * c + x1 * s] + ([xf[..., 2 * half:]] if D % 2 else []), dim=-1)
    return y.to(x.dtype)


def rotary_embedding(x, base=10000.0):
    """Rotary embedding of x [B, H, S, D] at positions 0..S-1 (GPT-NeoX /
    Llama rotate-half layout): the profile's kernel when enabled and an
    entry matches, else PyTorch (which is also what runs when nothing is
    enabled)."""
    a = _current
    if a is None or _compiling():
        return _rotary_torch(x, base)
    if x.dim() != 4:
        return a.call("rotary_embedding", list(x.shape), x.dtype, None, lambda: _rotary_torch(x, base),
                      "rotary_embedding of a %d-d tensor: the kernel takes [B, H, S, D]" % x.dim())
    if a.miss("rotary_embedding", list(x.shape), x.dtype):
        return a.call("rotary_embedding", list(x.shape), x.dtype, None, lambda: _rotary_torch(x, base))
    reason = None if float(base) == 10000.0 else "rotary base %s: the kernel's is 10000" % base
    if reason is None:
        reason, (xc,) = a.check([x])

    def launch(k):
        (y,) = a.run(k, [xc], [x.shape], x.dtype, x.device)
        return y
    return a.call("rotary_embedding", list(x.shape), x.dtype, launch, lambda: _rotary_torch(x, base), reason)


# ------------------------------------------------- transformers' Llama
def _hf_rmsnorm(a, orig):
    def forward(self, hidden_states):
        if _compiling():
            return orig(self, hidden_states)
        x = hidden_states
        eps = getattr(self, "variance_epsilon", getattr(self, "eps", None))
        if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.numel() == 0:
            return orig(self, hidden_states)
        return _rms_norm_core(a, x, x.shape[-1], self.weight, eps, lambda: orig(self, hidden_states))
    return forward


def _hf_mlp(a, orig):
    def forward(self, x):
        if _compiling():
            return orig(self, x)
        fb = lambda: orig(self, x)  # noqa: E731
        if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.numel() == 0:
            return fb()
        g, u, d = self.gate_proj, self.up_proj, self.down_proj
        dim, hidden = x.shape[-1], g.weight.shape[0]
        dims = [x.numel() // dim, dim, hidden]
        if a.miss("fused_mlp", dims, x.dtype):
            return a.call("fused_mlp", dims, x.dtype, None, fb)
        act = getattr(getattr(self, "config", None), "hidden_act", None)
        reason = None
        if act not in ("silu", "swish"):
            reason = "fused_mlp with activation %s: the kernel is SwiGLU (silu)" % act
        elif any(getattr(m, "bias", None) is not None for m in (g, u, d)):
            reason = "fused_mlp with biases: the kernel has none"
        else:
            reason, _ = a.check([x, g.weight, u.weight, d.weight], x.dtype)
        if reason:
            return a.call("fused_mlp", dims, x.dtype, None, fb, reason)
        try:
            ts = [x.contiguous() if a.copy else x, a.transposed(g.weight), a.transposed(u.weight),
                  a.transposed(d.weight)]
        except Skip as e:
            return a.call("fused_mlp", dims, x.dtype, None, fb, str(e))

        def launch(k):
            y, _h = a.run(k, ts, [x.shape, (dims[0], hidden)], x.dtype, x.device)
            return y
        return a.call("fused_mlp", dims, x.dtype, launch, fb, None)
    return forward


# -------------------------------------------------------------- patches
def _wrap(a, orig, body):
    def wrapper(*args, **kwargs):
        if _compiling():
            return orig(*args, **kwargs)
        return body(a, orig, args, kwargs)
    wrapper.__name__ = getattr(orig, "__name__", "wrapper")
    wrapper.__doc__ = getattr(orig, "__doc__", None)
    wrapper.__wrapped__ = orig
    return wrapper


def _patches(a):
    out = []

    def add(owner, name, body, op):
        if not a.wants(op) or not hasattr(owner, name):
            return
        out.append((owner, name, _wrap(a, getattr(owner, name), body)))

    def sm_f(a_, orig, args, kwargs):          # F.softmax(input, dim=None, _stacklevel=3, dtype=None)
        v = dict(zip(("input", "dim", "_stacklevel", "dtype"), args))
        v.update(kwargs)
        return _softmax(a_, orig, v.get("input"), v.get("dim"), v.get("dtype"), args, kwargs)

    def sm_t(a_, orig, args, kwargs):          # torch.softmax(input, dim, dtype=None), Tensor.softmax(self, dim, dtype=None)
        v = dict(zip(("input", "dim", "dtype"), args))
        v.update(kwargs)
        return _softmax(a_, orig, v.get("input", v.get("self")), v.get("dim"), v.get("dtype"), args, kwargs)

    def rms(a_, orig, args, kwargs):           # F.rms_norm(input, normalized_shape, weight=None, eps=None)
        v = dict(zip(("input", "normalized_shape", "weight", "eps"), args))
        v.update(kwargs)
        x, shape = v.get("input"), v.get("normalized_shape")
        shape = tuple(shape) if isinstance(shape, (list, tuple, torch.Size)) else (shape,)
        fb = lambda: orig(*args, **kwargs)  # noqa: E731
        if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.numel() == 0:
            return fb()
        if len(shape) != 1 or shape[0] != x.shape[-1]:
            n = x.shape[-1]
            return a_.call("rmsnorm", [x.numel() // n, n], x.dtype, None, fb,
                           "rms_norm over %s: the kernel normalizes the last dim only" % (shape,))
        return _rms_norm_core(a_, x, x.shape[-1], v.get("weight"), v.get("eps"), fb)

    add(F, "softmax", sm_f, "softmax")
    add(torch, "softmax", sm_t, "softmax")
    add(torch.Tensor, "softmax", sm_t, "softmax")
    add(F, "rms_norm", rms, "rmsnorm")
    add(F, "layer_norm", _layer_norm, "layernorm")
    add(F, "cross_entropy", _cross_entropy, "cross_entropy")
    add(F, "linear", _linear, "matmul")
    add(torch, "matmul", _matmul, "matmul")
    add(torch.Tensor, "__matmul__", _matmul, "matmul")
    add(F, "scaled_dot_product_attention", _sdpa, "flash_attention")
    if not a.wants("flash_attention"):
        add(F, "scaled_dot_product_attention", _sdpa, "split_kv_attention")
    llama = sys.modules.get("transformers.models.llama.modeling_llama")
    if llama is not None:
        if a.wants("rmsnorm") and hasattr(llama, "LlamaRMSNorm"):
            cls = llama.LlamaRMSNorm
            out.append((cls, "forward", _hf_rmsnorm(a, cls.forward)))
        if a.wants("fused_mlp") and hasattr(llama, "LlamaMLP"):
            cls = llama.LlamaMLP
            out.append((cls, "forward", _hf_mlp(a, cls.forward)))
    return out


def enable(package, ops=None, device=None, ordinal=None, copy=False, transpose_weights=True, report=None,
           print_at_exit=True, active=True):
    """Routes the catalog operators the program calls through package.

    package: a package folder (akctl profile export) or a Runtime.
    ops: names from OPS (rms_norm, layer_norm, softmax, cross_entropy, rotary,
      matmul/linear, fused_mlp, scaled_dot_product_attention) or catalog
      names (rmsnorm, flash_attention ...); None: all.
    device: None (this process's current CUDA device), a Device or a class
      string (lookups only: nothing launches without a CUDA device).
    copy: copy non-contiguous inputs instead of falling back (the copy is
      then part of what the gate measures).
    transpose_weights: linear and fused_mlp keep a transposed copy of each
      weight (the catalog takes B as [K, N]; nn.Linear stores [N, K]): more
      memory, no per-call transpose.
    report: JSON path written at exit (default $AKPROFILE_REPORT); the
      table goes to stderr at exit unless print_at_exit is False.
    Raises PackageRefused/Tampered for a package that fails verification."""
    if ops is not None:
        names = set()
        for o in ops:
            if o in OPS:
                names.update(OPS[o])
            elif o in _CATALOG:
                names.add(o)
            else:
                raise ValueError("akprofile.torch.enable: unknown operator %r (known: %s)"
                                 % (o, ", ".join(sorted(set(OPS) | _CATALOG))))
        ops = names
    if ordinal is None:
        ordinal = torch.cuda.current_device() if torch.cuda.is_available() else 0
    rt = package if isinstance(package, Runtime) else Runtime(package, device=device, ordinal=ordinal)
    a = Applied(rt, ops, copy, transpose_weights, report or os.environ.get("AKPROFILE_REPORT"), print_at_exit)
    if active:
        a.activate()
    return a
