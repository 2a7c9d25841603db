"""A randomly initialised Llama-style decoder for `akctl gate` (docs/apply.md).

    akctl gate --profile PKG --steps 20 -- python3 ops/apply/llama_gate.py [--layers 4] [--seq 512] [--decode 4]

Built from a transformers LlamaConfig (no download: random weights from a
fixed seed, the same for the float32 and the bf16 model), attention through
PyTorch's SDPA, no grouped heads (the catalog's attention takes equal q/k/v
shapes).  One step = a prefill of 1 x SEQ tokens, then DECODE single-token
steps on fixed tokens with the KV cache; the outputs are the prefill logits
and the decode logits.

What akprofile.torch can route in it: every nn.Linear (matmul, M = SEQ at
prefill, 1 at decode, with the weight transposed once), LlamaRMSNorm
(rmsnorm, M = SEQ or 1, N = hidden), LlamaMLP (fused_mlp), SDPA at prefill
(flash_attention; its q, k, v are transposed views, so they fall back as
non-contiguous unless ENABLE_KWARGS copy=True below, which copies them) and
SDPA at decode (split_kv_attention: 1 query over SEQ + i keys of the KV
cache, one entry per cache length).  `akctl gate --cuda-graph` captures the
whole step (prefill and decode) into one CUDA graph.
"""
import argparse
import sys

import torch

DTYPE = "bfloat16"
ENABLE_KWARGS = {"copy": False}

_p = argparse.ArgumentParser(prog="llama_gate.py")
_p.add_argument("--layers", type=int, default=4)
_p.add_argument("--hidden", type=int, default=2048)
_p.add_argument("--intermediate", type=int, default=5632)
_p.add_argument("--heads", type=int, default=16)
_p.add_argument("--vocab", type=int, default=32000)
_p.add_argument("--seq", type=int, default=512)
_p.add_argument("--decode", type=int, default=4)
_p.add_argument("--copy", action="store_true", help="copy non-contiguous attention inputs into the kernel")
_p.add_argument("--torch-rms-norm", action="store_true",
                help="LlamaRMSNorm through PyTorch's fused F.rms_norm (what a user can do by hand) instead of "
                     "transformers' composite: the baseline the profile must beat then")
ARGS = _p.parse_args(sys.argv[1:])
ENABLE_KWARGS["copy"] = ARGS.copy


def _torch_rms_norm():
    """LlamaRMSNorm.forward replaced by one F.rms_norm call (float32 math
    inside PyTorch's kernel, the weight applied in it): the same function
    as transformers' forward, rounded once instead of twice."""
    import torch.nn.functional as F
    from transformers.models.llama import modeling_llama

    def forward(self, hidden_states):
        return F.rms_norm(hidden_states, (hidden_states.shape[-1],), self.weight, eps=self.variance_epsilon)
    modeling_llama.LlamaRMSNorm.forward = forward


if ARGS.torch_rms_norm:
    _torch_rms_norm()


def _model(dtype):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=ARGS.vocab, hidden_size=ARGS.hidden, intermediate_size=ARGS.intermediate,
                      num_hidden_layers=ARGS.layers, num_attention_heads=ARGS.heads,
                      num_key_value_heads=ARGS.heads, max_position_embeddings=max(2048, ARGS.seq + ARGS.decode),
                      rms_norm_eps=1e-6, rope_theta=10000.0, hidden_act="silu", tie_word_embeddings=False,
                      attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg)         # float32 init from the seed, on the GPU
    return model.to(dtype).eval()


def make_step(dtype):
    model = _model(dtype)
    g = torch.Generator(device="cpu").manual_seed(1)
    prompt = torch.randint(0, ARGS.vocab, (1, ARGS.seq), generator=g).cuda()
    tokens = torch.randint(0, ARGS.vocab, (ARGS.decode, 1, 1), generator=g).cuda()

    def step():
        out = model(input_ids=prompt, use_cache=True)
        logits = [out.logits[0]]
        cache = out.past_key_values
        for i in range(ARGS.decode):
            out = model(input_ids=tokens[i], past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            logits.append(out.logits[0])
        return {"prefill": logits[0], "decode": torch.cat(logits[1:], dim=0) if ARGS.decode else logits[0][:0]}
    return step


if __name__ == "__main__":
    # a quick eager run without the gate: shapes and one step's time
    with torch.inference_mode():
        step = make_step(torch.bfloat16)
        out = step()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        step()
        e.record()
        e.synchronize()
        print("prefill logits %s, decode logits %s, step %.2f ms"
              % (tuple(out["prefill"].shape), tuple(out["decode"].shape), s.elapsed_time(e)))
