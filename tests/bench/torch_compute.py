#!/usr/bin/env python3
"""tests/bench/torch_compute.py: PyTorch's time for the compute-bound catalog
operators at the spec's GPU sizes, timed as bench_compute_ops times ours:
the L2 flushed (a 256 MiB buffer read) before every call, two CUDA events
around one call, the median of 7 after a warm-up.

    python3 tests/bench/torch_compute.py [DTYPE]      (default bfloat16)

matmul: a @ b (and, for the decode shapes, F.linear(a, w) with w = b^T
stored [N][K], as a model's weights are).  fused_mlp: y = (silu(x @ wg) *
(x @ wu)) @ wd (what the spec's kernels compute, h kept).  flash_attention:
F.scaled_dot_product_attention (its FlashAttention backend on the H200),
is_causal for mask 2.  Prints microseconds and TFLOP/s with the spec's
FLOP counts."""
import sys

import torch
import torch.nn.functional as F

DT = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[
    sys.argv[1] if len(sys.argv) > 1 else "bfloat16"]
dev = "cuda"
flush = torch.empty(256 << 20, dtype=torch.uint8, device=dev)


def bench(fn, samples=7):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(samples):
        flush.sum(dtype=torch.int64)  # read the buffer: the L2 holds nothing of ours
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(stop) * 1000.0)
    times.sort()
    return times[len(times) // 2]


def report(name, us, flops):
    print(f"torch {name:40s} {us:10.1f} us {flops / us / 1e6:8.1f} TFLOP/s", flush=True)


def rand(*shape, lo=-1.0, hi=1.0):
    return (torch.rand(*shape, device=dev, dtype=torch.float32) * (hi - lo) + lo).to(DT)


for name, (M, N, K) in {"matmul gpu_dec1_up": (1, 11008, 4096), "matmul gpu_dec16_down": (16, 4096, 11008),
                        "matmul gpu_1k": (1024, 1024, 2048), "matmul gpu_4k": (4096, 4096, 4096),
                        "matmul gpu_llm_up": (2048, 11008, 4096), "matmul gpu_b256_down": (256, 4096, 11008),
                        "matmul gpu_b128_qkv": (128, 12288, 4096)}.items():
    a, b = rand(M, K), rand(K, N)
    report(name, bench(lambda: a @ b), 2 * M * N * K)
    if M <= 16:  # a model's decode step: F.linear with the weight [N][K] (cuBLAS's other layout)
        w = b.t().contiguous()
        report(name + " F.linear", bench(lambda: F.linear(a, w)), 2 * M * N * K)

for name, (batch, dim, hidden) in {"fused_mlp gpu_tinyllama": (2048, 2048, 5632),
                                   "fused_mlp gpu_llama7b": (2048, 4096, 11008)}.items():
    x = rand(batch, dim)
    wg, wu = rand(dim, hidden, lo=-0.05, hi=0.05), rand(dim, hidden, lo=-0.05, hi=0.05)
    wd = rand(hidden, dim, lo=-0.01, hi=0.01)

    def mlp():
        h = F.silu(x @ wg) * (x @ wu)
        return h @ wd
    report(name, bench(mlp), 6 * batch * dim * hidden)

for name, (B, H, S, D, mask) in {"flash_attention gpu_llm": (4, 32, 2048, 128, 1),
                                 "flash_attention gpu_llm_causal": (4, 32, 2048, 128, 2),
                                 "flash_attention gpu_4k_causal": (2, 32, 4096, 128, 2)}.items():
    q, k, v = rand(B, H, S, D), rand(B, H, S, D), rand(B, H, S, D)
    report(name, bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=mask == 2)),
           4 * B * H * S * S * D // mask)
