"""Our Hopper attention against cuDNN at GPT-2 (12 heads) and GPT-2 medium (16 heads), B = 16, T = 1024, D = 64,
causal, bf16, with q, k, v as the model hands them over (strided views of c_attn's (B, T, 3C) output, the
tk::attention_qkv ops) and as contiguous (B, H, T, D) tensors (tk::attention ops), one process; cuDNN beside them: `bench/bench_attention.py --graphs --impls tk,cudnn
--causal true --shapes "16,12,1024,64;16,16,1024,64"`.

    python dev/attention_heads_layout.py [--shapes 16,12,1024,64 16,16,1024,64]

Why (session 24): in the GPT-2 medium train step (H100) our attention kernels took 343 / 122 us a layer
(backward / forward) against cuDNN's 303 / 111, while at 12 heads they are even with cuDNN; both kernels'
time grew 1.42x from 12 to 16 heads (1.33x more work). Forward and forward + backward as CUDA-graph replays
(do_bench medians, us, L2 flushed between replays by do_bench).
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tk_kernels  # noqa: E402,F401
from bench.bench_layernorm import graphed  # noqa: E402
from triton.testing import do_bench  # noqa: E402


def us(fn):
    return do_bench(graphed(fn), return_mode="median") * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=["16,12,1024,64", "16,16,1024,64", "16,16,1024,64,pad"])
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, torch.backends.cudnn.version())
    for spec in args.shapes:
        parts = spec.split(",")
        B, H, T, D = (int(x) for x in parts[:4])
        pad = len(parts) > 4  # the qkv rows padded by 64 elements (a row stride that is not 3 C)
        C = H * D
        width = 3 * C + (64 if pad else 0)
        base = torch.randn(B, T, width, device="cuda", dtype=torch.bfloat16) * 0.5
        qkv = base[..., :3 * C]
        dout_o = torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16)
        scale = D ** -0.5
        q, k, v = (t.contiguous() for t in tk_kernels.families.attention.ops.qkv_views(qkv, H))
        flops_f = 4 * B * H * T * T * D / 2  # causal

        def qkv_fwd():
            return torch.ops.tk.attention_qkv_fwd(qkv, H, True, scale, 0.0)
        o, lse, rng = qkv_fwd()
        dout = torch.empty_like(o).copy_(dout_o)  # o's layout, as the model's backward hands it over

        def qkv_bwd():
            return torch.ops.tk.attention_qkv_bwd(qkv, o, lse, dout, H, True, scale, False, 0.0, rng)

        def sep_fwd():
            return torch.ops.tk.attention_fwd(q, k, v, True, scale, 0.0)
        o2, lse2, rng2 = sep_fwd()
        dout2 = torch.empty_like(o2).copy_(dout_o)

        def sep_bwd():
            return torch.ops.tk.attention_bwd(q, k, v, o2, lse2, dout2, True, scale, False, 0.0, rng2)

        t = {"qkv fwd": us(qkv_fwd), "qkv bwd": us(qkv_bwd), "sep fwd": us(sep_fwd), "sep bwd": us(sep_bwd)}
        tf = lambda k, mult: mult * flops_f / (t[k] * 1e-6) / 1e12
        print(f"({B},{H},{T},{D}){' pad' if pad else ''} causal: us (TFLOP/s) | "
              + "  ".join(f"{k} {v:.1f} ({tf(k, 2.5 if 'bwd' in k else 1):.0f})"
                          for k, v in t.items()))


if __name__ == "__main__":
    main()
