"""Writes a profile package for this GPU whose one entry is planted
(tests/gpu/test_gpu_gate.c), and the program the gate runs on it.

    python3 gate_planted.py MODE DIR      MODE: good | wrong | slow

The entry: rmsnorm 512x2048 bfloat16, the catalog's warp_row kernel (ROWS=4
VEC=2, grid 128, block 32x4) for this device's class, as text:
  good   the kernel as the catalog has it;
  wrong  the normalisation replaced by a constant factor (outputs differ);
  slow   correct, with every row's warp sleeping ~200 us first (slower).
DIR/pkg is the package, DIR/step.py the program (eight rms_norm calls a
step on x of scale 3, weight 1.5: a wrong factor cannot pass for right)."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("AK_SOURCE_DIR") or os.path.normpath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "lib", "akprofile", "python"))
sys.path.insert(0, os.path.join(ROOT, "lib", "akprofile", "python", "tests"))
os.environ.setdefault("AK_SOURCE_DIR", ROOT)

import akprofile  # noqa: E402
import pkg        # noqa: E402

STEP = '''import torch
import torch.nn.functional as F
DTYPE = "bfloat16"


def make_step(dtype):
    g = torch.Generator(device="cuda").manual_seed(7)
    x = 3.0 * torch.randn(512, 2048, device="cuda", generator=g).to(dtype)
    w = torch.full((2048,), 1.5, device="cuda", dtype=dtype)

    def step():
        y = x
        for _ in range(8):
            y = F.rms_norm(y, (2048,), w, eps=1e-6) * 3.0
        return y
    return step
'''

ANCHOR_NORM = "const float inv = 1.0f / sqrtf (ss / (float) N + 1e-6f);"
ANCHOR_ROW = "const int lane = threadIdx.x;"


def main():
    mode, out = sys.argv[1], sys.argv[2]
    dev = akprofile.current_device(0)
    src = pkg.read("kernels/rmsnorm/cuda/warp_row.cu")
    if ANCHOR_NORM not in src or ANCHOR_ROW not in src:
        sys.exit("gate_planted.py: kernels/rmsnorm/cuda/warp_row.cu changed: update the planted edits")
    if mode == "wrong":
        src = src.replace(ANCHOR_NORM, "const float inv = 0.5f;  /* planted: no normalisation */")
    elif mode == "slow":
        src = src.replace(ANCHOR_ROW, ANCHOR_ROW + "\n    if (lane == 0) for (int i = 0; i < 50; i++) __nanosleep (4000);"
                                      "  /* planted: slow */\n    __syncwarp ();")
    elif mode != "good":
        sys.exit("gate_planted.py: MODE is good, wrong or slow")
    e = pkg.entry("rmsnorm", ["M", "N"], [512, 2048], "bfloat16", "warp_row_" + mode,
                  "kernels/rmsnorm/cuda/warp_row.cu", [("ROWS", 4), ("VEC", 2)], [128, 1, 1], [32, 4, 1],
                  [("x", 512 * 2048), ("w", 2048)], [("y", 512 * 2048)])
    e["_text"] = src
    device = pkg.device_info(dev)
    os.makedirs(out, exist_ok=True)
    pkg.build(os.path.join(out, "pkg"), entries=[e], device_class=dev.device_class, name="planted-" + mode,
              device=device)
    with open(os.path.join(out, "step.py"), "w") as f:
        f.write(STEP)
    print("gate_planted.py: %s package for %s in %s" % (mode, dev.device_class, out))


if __name__ == "__main__":
    main()
