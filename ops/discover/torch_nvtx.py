#!/usr/bin/env python3
"""ops/discover/torch_nvtx.py: run an unmodified PyTorch script with NVTX
ranges that `akctl discover` can map to catalog operators.

    python3 ops/discover/torch_nvtx.py [OPTIONS] script.py [ARGS...]
    akctl discover --out DIR --step-range step -- \\
        python3 ops/discover/torch_nvtx.py --step-module LlamaForCausalLM script.py ARGS

The script runs through runpy as __main__ (sys.argv is [script.py, ARGS...]).
Two ways to get ranges with shapes (--ranges):
  all (default)  inside torch.autograd.profiler.emit_nvtx(record_shapes=True):
                 every aten op becomes a range "aten::mm, seq = N, sizes =
                 [[512, 2048], [2048, 6144]]", wherever it is called from
                 (Python or C++): shapes for every operator the catalog maps,
                 at the price of a range (and its shapes formatted) for
                 every aten op, views included: on a launch-bound model this
                 costs more than the program (3x the step on the H200 demo);
  catalog        no emit_nvtx: ranges only for the Python entry points of the
                 operators the catalog maps (torch.mm/addmm/matmul/bmm/softmax/
                 addcmul, F.linear/softmax/layer_norm/rms_norm/cross_entropy/
                 scaled_dot_product_attention, the same Tensor methods and @)
                 and for the module classes it maps (Linear, *RMSNorm,
                 LayerNorm, *AdaRMSNorm, SiluAndMul, GeluAndMul), named as
                 emit_nvtx would ("aten::linear, sizes = [...], dtypes =
                 [...]").  Cheap (a Python wrapper per mapped call), but blind
                 to what C++ calls without Python (an aten::mm inside another
                 C++ op, custom ops through torch.ops such as vLLM's
                 _C::silu_and_mul outside their modules): the other ops'
                 kernels are still timed and ranked, under the enclosing
                 range (the module or the step), never dropped.
emit_nvtx gives shapes but no dtypes, so this launcher adds, where cheap:
  - a range per nn.Module call (global forward hooks):
    "module::LlamaRMSNorm, sizes = [[1, 512, 2048]], dtypes = [bfloat16]"
    (nn.Linear also with its weight: sizes = [[x], [out, in]]); akctl
    discover gives the ops inside a module its dtype, and maps *RMSNorm,
    LayerNorm and Linear modules to catalog operators themselves;
  - a range around torch.nn.functional.scaled_dot_product_attention:
    "torch_nvtx::sdpa, sizes = [[q], [k], [v]], dtypes = [...],
    is_causal = 1, has_mask = 0" (emit_nvtx shows neither flag).
Steps: NVTX cannot know what a step of an arbitrary script is.  The script
may push its own ranges (torch.cuda.nvtx.range_push("step")); or
--step-module NAME makes each outermost call of a module class NAME (e.g.
the model: one forward = one step) a range named by --step-name (default
"step").  Without either, use akctl discover --skip-ms.

Options (before the script):
  --step-module NAME   each outermost forward of module class NAME is a step
  --step-name NAME     the step range's name (default: step)
  --no-modules         no module ranges (less overhead, no dtypes from modules)
  --no-shapes          emit_nvtx without record_shapes (no shapes: nothing maps)
  --ranges all|catalog every aten op through emit_nvtx (default), or only the
                       catalog's operators (above)
"""
import os
import runpy
import sys
import threading


def _usage(msg):
    sys.stderr.write("torch_nvtx.py: %s\nusage: python3 ops/discover/torch_nvtx.py [--step-module NAME] "
                     "[--step-name NAME] [--no-modules] [--no-shapes] [--ranges all|catalog] script.py [ARGS...]\n" % msg)
    sys.exit(2)


def _parse(argv):
    opts = {"step_module": None, "step_name": "step", "modules": True, "shapes": True, "ranges": "all"}
    i = 0
    while i < len(argv) and (argv[i].startswith("--") or argv[i] == "-h"):
        a = argv[i]
        if a in ("--step-module", "--step-name", "--ranges"):
            if i + 1 >= len(argv) or not argv[i + 1]:
                _usage("%s needs a value" % a)
            if a == "--ranges" and argv[i + 1] not in ("all", "catalog"):
                _usage("--ranges is all or catalog, not %s" % argv[i + 1])
            opts[a[2:].replace("-", "_")] = argv[i + 1]
            i += 2
            continue
        if a == "--no-modules":
            opts["modules"] = False
        elif a == "--no-shapes":
            opts["shapes"] = False
        elif a == "--":
            i += 1
            break
        elif a in ("-h", "--help"):
            sys.stdout.write(__doc__)
            sys.exit(0)
        else:
            _usage("unknown option %s" % a)
        i += 1
    if i >= len(argv):
        _usage("no script given")
    return opts, argv[i], argv[i + 1:]


def _dtype(t):
    return str(t.dtype).replace("torch.", "")


def _describe(args):
    """sizes = [[..], ..], dtypes = [..] of the tensor arguments (others: [])."""
    import torch
    sizes, dtypes = [], []
    for a in args:
        if isinstance(a, torch.Tensor):
            sizes.append("[" + ", ".join(str(int(d)) for d in a.shape) + "]")
            dtypes.append(_dtype(a))
        else:
            sizes.append("[]")
    text = "sizes = [" + ", ".join(sizes) + "]"
    if dtypes:
        text += ", dtypes = [" + ", ".join(dtypes) + "]"
    return text


def _install(opts):
    import torch
    import torch.nn.functional as F
    from torch.cuda import nvtx
    local = threading.local()

    if opts["modules"] or opts["step_module"]:
        from torch.nn.modules import module as mm

        catalog = opts["ranges"] == "catalog"

        def pre(module, args):
            name = type(module).__name__
            if catalog and name != opts["step_module"] and not _mapped_module(name):
                return
            depth = getattr(local, "depth", 0)
            step = (opts["step_module"] == name and not getattr(local, "in_step", False))
            if step:
                local.in_step = True
                nvtx.range_push(opts["step_name"])
            stack = getattr(local, "stack", None)
            if stack is None:
                stack = local.stack = []
            pushed = False
            if opts["modules"] and (not catalog or _mapped_module(name)):
                if isinstance(module, torch.nn.Linear) and args and isinstance(args[0], torch.Tensor):
                    x = args[0]
                    text = "module::Linear, sizes = [[%s], [%d, %d]], dtypes = [%s]" % (
                        ", ".join(str(int(d)) for d in x.shape), module.out_features, module.in_features,
                        _dtype(x))
                else:
                    text = "module::%s, %s" % (name, _describe(args))
                nvtx.range_push(text)
                pushed = True
            busy = getattr(local, "busy", False)
            if pushed and catalog:
                local.busy = True           # the calls inside map to this module's range
            stack.append((pushed, step, busy))
            local.depth = depth + 1

        def post(module, args, output):
            if catalog and type(module).__name__ != opts["step_module"] and not _mapped_module(type(module).__name__):
                return
            stack = getattr(local, "stack", None)
            if not stack:
                return
            pushed, step, busy = stack.pop()
            local.busy = busy
            if pushed:
                nvtx.range_pop()
            if step:
                nvtx.range_pop()
                local.in_step = False
            local.depth = max(0, getattr(local, "depth", 1) - 1)

        mm.register_module_forward_pre_hook(pre)
        mm.register_module_forward_hook(post)

    original = F.scaled_dot_product_attention

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *args, **kwargs):
        text = "torch_nvtx::sdpa, %s, is_causal = %d, has_mask = %d" % (
            _describe([query, key, value]), 1 if is_causal else 0, 0 if attn_mask is None else 1)
        nvtx.range_push(text)
        try:
            return original(query, key, value, attn_mask, dropout_p, is_causal, *args, **kwargs)
        finally:
            nvtx.range_pop()

    F.scaled_dot_product_attention = sdpa
    torch.nn.functional.scaled_dot_product_attention = sdpa
    if opts["ranges"] == "catalog":
        _install_catalog(torch, F, nvtx, local)


# --ranges catalog: the Python entry points of the operators the catalog
# maps (discover/catalog_map.c), each with the aten name its range takes.
_CATALOG_FUNCS = [
    ("torch", "mm", "aten::mm"), ("torch", "addmm", "aten::addmm"), ("torch", "matmul", "aten::matmul"),
    ("torch", "bmm", "aten::bmm"), ("torch", "softmax", "aten::softmax"), ("torch", "addcmul", "aten::addcmul"),
    ("F", "linear", "aten::linear"), ("F", "softmax", "aten::softmax"), ("F", "layer_norm", "aten::layer_norm"),
    ("F", "rms_norm", "aten::rms_norm"), ("F", "cross_entropy", "aten::cross_entropy_loss"),
    ("Tensor", "mm", "aten::mm"), ("Tensor", "matmul", "aten::matmul"), ("Tensor", "__matmul__", "aten::matmul"),
    ("Tensor", "bmm", "aten::bmm"), ("Tensor", "softmax", "aten::softmax"), ("Tensor", "addcmul", "aten::addcmul"),
]
_MAPPED_SUFFIXES = ("RMSNorm",)
_MAPPED_MODULES = {"Linear", "LayerNorm", "SiluAndMul", "GeluAndMul"}


def _mapped_module(name):
    return name in _MAPPED_MODULES or name.endswith(_MAPPED_SUFFIXES)


def _install_catalog(torch, F, nvtx, local):
    owners = {"torch": torch, "F": F, "Tensor": torch.Tensor}

    def wrap(fn, name):
        def ranged(*args, **kwargs):
            if getattr(local, "busy", False):
                return fn(*args, **kwargs)
            local.busy = True
            nvtx.range_push("%s, %s" % (name, _describe(args)))
            try:
                return fn(*args, **kwargs)
            finally:
                nvtx.range_pop()
                local.busy = False
        ranged.__wrapped__ = fn
        return ranged

    for owner, attr, name in _CATALOG_FUNCS:
        fn = getattr(owners[owner], attr, None)
        if fn is not None:
            setattr(owners[owner], attr, wrap(fn, name))


def main():
    opts, script, args = _parse(sys.argv[1:])
    if not os.path.exists(script):
        sys.stderr.write("torch_nvtx.py: %s: no such file\n" % script)
        sys.exit(2)
    import torch
    _install(opts)
    sys.argv = [script] + args
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    if opts["ranges"] == "catalog":
        runpy.run_path(script, run_name="__main__")
        return
    with torch.autograd.profiler.emit_nvtx(record_shapes=opts["shapes"]):
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
