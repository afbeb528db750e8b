"""Is our attention forward's in-step slowness a power / clock effect? (session 44)

s44a (H100): in GPT-2 medium's step (bench_train --profile --trace) our forward takes 124-141 us a call, uniform
across the layers of a step and moving from step to step (125 in one, 136 in the next), cuDNN's 108-119 in torch's
step; in short bursts of graph replays (dev/attention_in_step.py: alone, after c_attn's GEMM, inside a block's
GEMMs) both take 103-106 us. This replays the same block (c_attn GEMM, attention forward, c_proj and the MLP GEMMs;
`--what alone`: eight attention forwards) for --secs seconds without a pause, then profiles --reps more replays:
if ours slows to its in-step time under sustained load and cuDNN does not, the cause is how our kernel fares at
the clocks the power limit sets. Run `nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 100`
beside it to see the clocks; each phase prints its wall time.

    python dev/attention_sustained.py [--heads 16 12] [--secs 3] [--rounds 2] [--what layer alone]
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tk_kernels  # noqa: E402,F401
from tk_kernels.families.attention import ops as attention_ops  # noqa: E402
from bench.bench_layernorm import graphed  # noqa: E402
from dev.attention_in_step import kernel_stats  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, nargs="+", default=[16, 12])
    ap.add_argument("--secs", type=float, default=3.0)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--what", nargs="+", default=["layer", "alone"])
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, "cuDNN", torch.backends.cudnn.version())
    B, T, D = 16, 1024, 64
    N = B * T
    for H in args.heads:
        C = H * D
        scale = D ** -0.5
        x = torch.randn(N, C, device="cuda", dtype=torch.bfloat16)
        w_attn = (torch.randn(3 * C, C, device="cuda") * C ** -0.5).to(torch.bfloat16)
        b_attn = torch.zeros(3 * C, device="cuda")
        w_proj = (torch.randn(C, C, device="cuda") * C ** -0.5).to(torch.bfloat16)
        w_fc = (torch.randn(4 * C, C, device="cuda") * C ** -0.5).to(torch.bfloat16)
        w_fc2 = (torch.randn(C, 4 * C, device="cuda") * (4 * C) ** -0.5).to(torch.bfloat16)
        qkv0 = F.linear(x, w_attn).view(B, T, 3 * C)

        def ours_attn(qkv):
            return torch.ops.tk.attention_qkv_fwd(qkv, H, True, scale, 0.0)[0]

        def cudnn_attn(qkv):
            q, k, v = attention_ops.qkv_views(qkv, H)
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)

        def ours_gemm(a, w, b=None):
            return torch.ops.tk.linear_fwd(a, w, b)[0]

        def torch_gemm(a, w, b=None):
            return F.linear(a, w, None if b is None else b.to(a.dtype))

        impls = {"ours": (ours_attn, ours_gemm, "attention_fwd_hopper"),
                 "cuDNN": (cudnn_attn, torch_gemm, "fprop")}
        graphs = {}
        for name, (attn, gemm, match) in impls.items():
            def layer(attn=attn, gemm=gemm):
                qkv = gemm(x, w_attn, b_attn).view(B, T, 3 * C)
                y = attn(qkv).transpose(1, 2).reshape(N, C)
                h = gemm(y, w_proj)
                return gemm(gemm(h, w_fc), w_fc2)

            def alone(attn=attn):
                for _ in range(8):
                    y = attn(qkv0)
                return y
            for what in args.what:
                graphs[(name, what)] = (graphed(layer if what == "layer" else alone), match)
        for r in range(args.rounds):
            for what in args.what:
                for name in impls:
                    replay, match = graphs[(name, what)]
                    short = kernel_stats(replay, args.reps, match)
                    t0 = time.time()
                    n = 0
                    while time.time() - t0 < args.secs:
                        for _ in range(20):
                            replay()
                        torch.cuda.synchronize()
                        n += 20
                    hot = kernel_stats(replay, args.reps, match)
                    print(f"{time.strftime('%H:%M:%S')} H={H:2d} round {r} {what:5s} {name:5s}: attention forward "
                          f"{short[0]:6.1f} us cold -> {hot[0]:6.1f} us after {n} replays in {args.secs:g} s "
                          f"(min {hot[1]:.1f}, max {hot[2]:.1f})", flush=True)
                    time.sleep(1.0)  # let the clocks come back
        del graphs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
