"""Sweep of the causal Hopper backward's launch-group size (heads per group; the launcher's rule when it ran: half the
L2 over 8 T D bytes a head = 50 heads on an H100 at T = 1024, D = 64; a quarter since 97c01d4), with dev/patches/attention_bwd_group_env.patch applied
(TK_HB_GROUP overrides the rule). CUDA-graph replays of tk::attention_qkv_bwd, us, at 12 and 16 heads.

    python dev/attention_bwd_group_sweep.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tk_kernels  # noqa: E402,F401  (registers torch.ops.tk)
from bench.bench_layernorm import graphed  # noqa: E402
from triton.testing import do_bench  # noqa: E402

GROUPS = ["", "4", "8", "12", "16", "24", "32", "64", "256"]  # "" = the launcher's rule


def backward_us(call, group: str | int | None) -> float:
    """do_bench median (us) of CUDA-graph replays of `call` captured with TK_HB_GROUP = group (None or "": the
    launcher's own rule; the launcher reads it while the graph is captured)."""
    if group:
        os.environ["TK_HB_GROUP"] = str(group)
    else:
        os.environ.pop("TK_HB_GROUP", None)
    try:
        return do_bench(graphed(call), return_mode="median") * 1e3
    finally:
        os.environ.pop("TK_HB_GROUP", None)


def main():
    print(torch.cuda.get_device_name(), torch.__version__)
    for H in (12, 16):
        B, T, D = 16, 1024, 64
        C = H * D
        qkv = torch.randn(B, T, 3 * C, device="cuda", dtype=torch.bfloat16) * 0.5
        o, lse, rng = torch.ops.tk.attention_qkv_fwd(qkv, H, True, D ** -0.5, 0.0)
        dout = torch.empty_like(o).copy_(torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16))
        row = []
        for rep in range(2):
            for gsz in GROUPS:
                t = backward_us(lambda: torch.ops.tk.attention_qkv_bwd(qkv, o, lse, dout, H, True, D ** -0.5, False,
                                                                       0.0, rng), gsz)
                row.append((gsz or "rule", rep, t))
        print(f"H={H}: " + "  ".join(f"{g}:{t:.1f}" for g, r, t in row))


if __name__ == "__main__":
    main()
