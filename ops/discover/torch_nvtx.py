#!/usr/bin/env python3
"""ops/discover/torch_nvtx.py: run an unmodified PyTorch script with NVTX
ranges that `akctl discover` can map to catalog operators.

    python3 ops/discover/torch_nvtx.py [OPTIONS] script.py [ARGS...]
    akctl discover --out DIR --step-range step -- \\
        python3 ops/discover/torch_nvtx.py --step-module LlamaForCausalLM script.py ARGS

The script runs through runpy as __main__ (sys.argv is [script.py, ARGS...])
inside torch.autograd.profiler.emit_nvtx(record_shapes=True): every aten op
becomes a range "aten::mm, seq = N, sizes = [[512, 2048], [2048, 6144]]".
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
"""
import os
import runpy
import sys
import threading


def _usage(msg):
    sys.stderr.write("torch_nvtx.py: %s\nusage: python3 ops/discover/torch_nvtx.py [--step-module NAME] "
                     "[--step-name NAME] [--no-modules] [--no-shapes] script.py [ARGS...]\n" % msg)
    sys.exit(2)


def _parse(argv):
    opts = {"step_module": None, "step_name": "step", "modules": True, "shapes": True}
    i = 0
    while i < len(argv) and argv[i].startswith("--"):
        a = argv[i]
        if a in ("--step-module", "--step-name"):
            if i + 1 >= len(argv) or not argv[i + 1]:
                _usage("%s needs a value" % a)
            opts["step_module" if a == "--step-module" else "step_name"] = argv[i + 1]
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

        def pre(module, args):
            name = type(module).__name__
            depth = getattr(local, "depth", 0)
            step = (opts["step_module"] == name and not getattr(local, "in_step", False))
            if step:
                local.in_step = True
                nvtx.range_push(opts["step_name"])
            stack = getattr(local, "stack", None)
            if stack is None:
                stack = local.stack = []
            pushed = False
            if opts["modules"]:
                if isinstance(module, torch.nn.Linear) and args and isinstance(args[0], torch.Tensor):
                    x = args[0]
                    text = "module::Linear, sizes = [[%s], [%d, %d]], dtypes = [%s]" % (
                        ", ".join(str(int(d)) for d in x.shape), module.out_features, module.in_features,
                        _dtype(x))
                else:
                    text = "module::%s, %s" % (name, _describe(args))
                nvtx.range_push(text)
                pushed = True
            stack.append((pushed, step))
            local.depth = depth + 1

        def post(module, args, output):
            stack = getattr(local, "stack", None)
            if not stack:
                return
            pushed, step = stack.pop()
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


def main():
    opts, script, args = _parse(sys.argv[1:])
    if not os.path.exists(script):
        sys.stderr.write("torch_nvtx.py: %s: no such file\n" % script)
        sys.exit(2)
    import torch
    _install(opts)
    sys.argv = [script] + args
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    with torch.autograd.profiler.emit_nvtx(record_shapes=opts["shapes"]):
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
