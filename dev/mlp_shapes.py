"""The MLP's GEMMs at one width C, ours against cuBLAS (+ the eager GELU pass where ours fuses it), cold and under
sustained load (session 46): where issue 11's C = 2048 row (MLP fwd+bwd 1.02-1.03x the best torch, H100, session 43)
loses against C = 768 / 1024 (1.08-1.13x).

    python dev/mlp_shapes.py [--C 2048] [--secs 1.5]

The six products of an MLP step at N = 16384 tokens, as bench/bench_mlp.py's gemm_fns builds them (same operands for
both): fc forward + GELU, proj forward, proj dX * gelu', fc dX, and the two weight gradients (ours: store_f32 into a
zeroed fp32 output; cuBLAS: 16-bit output). Kernel time a call: torch.profiler over a CUDA graph of 4 calls, once
after a 1 s pause (cold) and once after --secs s of back-to-back replays (hot), as dev/sustained_pairs.py.
"""
import argparse
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from bench.bench_mlp import gemm_fns  # noqa: E402
from dev.sustained_pairs import cold_hot  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--C", type=int, nargs="+", default=[2048])
    ap.add_argument("--N", type=int, default=16384)
    ap.add_argument("--secs", type=float, default=1.5)
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    calls = 4
    for C in args.C:
        N, H = args.N, 4 * C
        cases = [("+gelu", N, H, C), ("x W^T", N, C, H), ("dy W*gelu'", N, H, C), ("dy W", N, C, H),
                 ("dy^T x", C, H, N), ("dy^T x", H, C, N)]
        tot = [0.0] * 4
        for layout, M, Nn, K in cases:
            fns = gemm_fns(layout, M, Nn, K, torch.bfloat16)
            (oc, oh), (pc, ph) = (cold_hot(fn, calls, args.secs, 5) for fn in fns)
            tot = [tot[0] + oc, tot[1] + oh, tot[2] + pc, tot[3] + ph]
            tf = 2 * M * Nn * K / 1e6
            print(f"C={C} {layout:11s} ({M},{Nn},{K}): ours {oc:7.1f} -> {oh:7.1f} us ({tf / oc:4.0f} -> {tf / oh:4.0f} "
                  f"TFLOP/s), peer {pc:7.1f} -> {ph:7.1f} ({tf / pc:4.0f} -> {tf / ph:4.0f}); peer / ours cold "
                  f"{pc / oc:.3f}, hot {ph / oh:.3f}", flush=True)
            del fns
            torch.cuda.empty_cache()
        print(f"C={C} all six: ours {tot[0]:.0f} -> {tot[1]:.0f} us, peer {tot[2]:.0f} -> {tot[3]:.0f}; peer / ours cold "
              f"{tot[2] / tot[0]:.3f}, hot {tot[3] / tot[1]:.3f}", flush=True)


if __name__ == "__main__":
    main()
