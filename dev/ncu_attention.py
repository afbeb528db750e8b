"""Attention forward + backward a few times at one shape, for Nsight Compute (dev/gpu_call_s8b.sh).

    ncu -k regex:KERNEL --launch-skip 3 --launch-count 1 --set full -o rep python dev/ncu_attention.py --impl tk

--impl tk runs our kernels (tk_kernels' dispatch: the Hopper path on sm_90), cudnn / flash SDPA's backends.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench.bench_attention import make_impl  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--impl", default="tk")
ap.add_argument("--shape", default="16,12,1024,64", help="B,H,T,D")
ap.add_argument("--causal", type=int, default=1)
ap.add_argument("--iters", type=int, default=5)
args = ap.parse_args()
B, H, T, D = map(int, args.shape.split(","))
fn = make_impl(args.impl)
q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
do = torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16)
for _ in range(args.iters):
    o = fn(q, k, v, bool(args.causal))
    torch.autograd.grad(o, (q, k, v), do)
torch.cuda.synchronize()
print("ok", args.impl, args.shape, "causal" if args.causal else "full")
