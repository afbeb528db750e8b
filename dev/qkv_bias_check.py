"""c_attn's bias gradient summed by the Hopper backward's row passes (csrc/qkv_bias_grad.cuh), checked and timed.

    python dev/qkv_bias_check.py            # small cases against PyTorch's sums of the op's own dq, dv (sanitizers)
    python dev/qkv_bias_check.py --time     # GPT-2's layer: backward + the MLP family's column sums of dqkv (what
                                            # c_attn's backward did) vs the backward summing the bias itself
"""
import argparse
import math
import os
import sys

import torch
from triton.testing import do_bench

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tk_kernels.families.attention import ops as tka  # noqa: E402


def check() -> None:
    torch.manual_seed(0)
    worst = 0.0
    for (B, H, T, D) in [(1, 1, 1, 64), (3, 5, 17, 64), (2, 3, 200, 128), (1, 3, 130, 64)]:
        for causal in (True, False):
            C = H * D
            qkv = torch.randn(B, T, 3 * C, device="cuda").bfloat16()
            dout = torch.randn(B, H, T, D, device="cuda").bfloat16()
            o, lse, rng = torch.ops.tk.attention_qkv_fwd(qkv, H, causal, 1 / math.sqrt(D), 0.0)
            dqkv, db = torch.ops.tk.attention_qkv_bwd(qkv, o, lse, dout, H, causal, 1 / math.sqrt(D), False, 0.0, rng,
                                                      True)
            dq = dqkv.view(B, T, 3, C)[:, :, 0].double().sum((0, 1))
            dv = dout.double().sum((0, 2)).flatten()
            ref = torch.cat([dq, torch.zeros_like(dq), dv])
            err = ((db.double() - ref).norm() / ref.norm()).item()
            worst = max(worst, err)
            print(f"B={B} H={H} T={T} D={D} causal={causal}: rel err {err:.2e}, k third zero: "
                  f"{bool(torch.all(db[C:2 * C] == 0))}")
    torch.cuda.synchronize()
    print(f"ran: worst rel err {worst:.2e}")


def time_it() -> None:
    from tk_kernels.families.mlp import ops as mlp_ops
    B, H, T, D = 16, 12, 1024, 64
    C = H * D
    qkv = torch.randn(B, T, 3 * C, device="cuda").bfloat16()
    dout = torch.randn(B, H, T, D, device="cuda").bfloat16()
    o, lse, rng = torch.ops.tk.attention_qkv_fwd(qkv, H, True, 0.125, 0.0)

    def before():
        dqkv, _ = torch.ops.tk.attention_qkv_bwd(qkv, o, lse, dout, H, True, 0.125, False, 0.0, rng, False)
        return mlp_ops._column_sums(dqkv.view(-1, 3 * C), torch.float32)

    def after():
        return torch.ops.tk.attention_qkv_bwd(qkv, o, lse, dout, H, True, 0.125, False, 0.0, rng, True)[1]

    a, b = before(), after()
    a[C:2 * C] = 0
    print(f"bias gradients: rel diff {((a - b).norm() / a.norm()).item():.2e}")
    for _ in range(2):
        for name, fn in (("backward + column sums of dqkv", before), ("backward summing the bias", after)):
            ms = do_bench(fn, warmup=50, rep=300, return_mode="median")
            print(f"{name}: {ms * 1000:.1f} us")


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--time", action="store_true")
    args = p.parse_args()
    time_it() if args.time else check()
