#!/usr/bin/env python3
"""ops/discover/llama_demo.py: a randomly initialised Llama-style decoder
(transformers LlamaConfig, no downloads) in bf16 on the GPU: per repeat, a
prefill of BATCHxPREFILL tokens and DECODE single-token steps with the KV
cache, each step inside an NVTX range "step" and ending in a synchronise
(the step's wall time is its GPU time plus launch gaps).

    python3 ops/discover/llama_demo.py [--repeats 3] [--prefill 512] [--decode 8]
    akctl discover --out /tmp/disc --step-range step --warmup-steps 9 --steps 9 -- \\
        python3 ops/discover/torch_nvtx.py ops/discover/llama_demo.py --repeats 2

A repeat is 1 + DECODE steps (9 with the defaults), so --warmup-steps 9
skips the first repeat.  --step-times prints one JSON line per measured
step ({"step": i, "kind": "prefill"|"decode", "ms": t, "cpu_ms": c,
"thread_cpu_ms": m}: wall time, the process's CPU time over all its threads
and the main thread's CPU time, each over the step) for
ops/bench/discover_overhead.sh; --torch-profiler FILE profiles the repeats
after the first with torch.profiler and writes {"steps": n,
"kernel_us": total} to FILE (the sum of its kernel events).

--cuda-graph runs a repeat as a serving engine runs its decode loop: one
eager repeat (outside any "step" range) warms up, the next is captured
into one CUDA graph (prefill and the DECODE steps, the KV cache and the
argmax tokens inside it; outside any range too), and each repeat is then
one replay of that graph inside one "step" range: kind "graph", one step
a repeat (so --warmup-steps 1 skips the first replay).
"""
import argparse
import json
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--prefill", type=int, default=512)
    ap.add_argument("--decode", type=int, default=8)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--intermediate", type=int, default=5632)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--step-times", action="store_true")
    ap.add_argument("--torch-profiler", metavar="FILE")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cuda-graph", action="store_true",
                    help="one CUDA graph a repeat (prefill and decode steps), one step range a replay")
    a = ap.parse_args()

    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    if not torch.cuda.is_available():
        sys.stderr.write("llama_demo.py: no CUDA device\n")
        return 3
    torch.manual_seed(a.seed)
    cfg = LlamaConfig(hidden_size=a.hidden, intermediate_size=a.intermediate, num_hidden_layers=a.layers,
                      num_attention_heads=a.heads, num_key_value_heads=a.heads, vocab_size=a.vocab,
                      max_position_embeddings=max(2048, a.prefill + a.decode + 1), attn_implementation="sdpa")
    # initialised on the GPU (as ops/apply/llama_gate.py): ~540 M float32
    # parameters drawn on the CPU took seconds of every run's start
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)
    model = model.to(torch.bfloat16).eval()
    ids = torch.randint(0, a.vocab, (a.batch, a.prefill), device="cuda")
    nvtx = torch.cuda.nvtx

    def step(state):
        """One forward step (prefill when state's cache is empty), its cache
        and argmax token into state."""
        out = model(input_ids=state["tokens"], past_key_values=state["past"], use_cache=True)
        state["past"] = out.past_key_values
        state["tokens"] = out.logits[:, -1:].argmax(-1)

    def one_repeat():
        """Prefill and DECODE steps, eager, no ranges: the graph's body."""
        state = {"past": None, "tokens": ids}
        for _ in range(1 + a.decode):
            step(state)

    def timed(step_no, kind, body):
        """One step range around body() and a synchronise: a step of either mode."""
        t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
        nvtx.range_push("step")
        body()
        torch.cuda.synchronize()
        nvtx.range_pop()
        ms = (time.perf_counter() - t0) * 1e3
        cpu, mcpu = (time.process_time() - c0) * 1e3, (time.thread_time() - m0) * 1e3
        return {"step": step_no, "kind": kind, "ms": ms, "cpu_ms": cpu, "thread_cpu_ms": mcpu}

    prof = None
    step_no = 0
    with torch.inference_mode():
        graph = None
        if a.cuda_graph:
            one_repeat()                        # warm-up: allocations, cuBLAS handles, autotuning
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            try:
                with torch.cuda.graph(graph):
                    one_repeat()
            except Exception as e:
                sys.stderr.write("llama_demo.py: --cuda-graph: the repeat could not be captured: %s\n" % e)
                return 1
            torch.cuda.synchronize()
        for rep in range(a.repeats):
            if a.torch_profiler and rep == 1:
                from torch.profiler import ProfilerActivity, profile
                prof = profile(activities=[ProfilerActivity.CUDA])
                prof.__enter__()
            # one replay a repeat, or prefill and DECODE eager steps
            state = {"past": None, "tokens": ids}
            steps = [("graph", graph.replay)] if graph is not None else \
                [("prefill" if s == 0 else "decode", lambda: step(state)) for s in range(1 + a.decode)]
            for kind, body in steps:
                row = timed(step_no, kind, body)
                if a.step_times and rep > 0:
                    print(json.dumps(row), flush=True)
                step_no += 1
    if prof is not None:
        prof.__exit__(None, None, None)
        path = a.torch_profiler + ".trace.json"
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)
        events = events.get("traceEvents", events) if isinstance(events, dict) else events
        kernel_us = sum(float(e.get("dur", 0)) for e in events
                        if isinstance(e, dict) and e.get("cat") == "kernel" and e.get("ph") == "X")
        with open(a.torch_profiler, "w") as f:
            json.dump({"steps": (a.repeats - 1) * (1 if graph is not None else 1 + a.decode),
                       "kernel_us": kernel_us}, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
