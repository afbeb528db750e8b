"""Where an attention backward's time goes, kernel by kernel, ours beside SDPA's cuDNN backend (torch.profiler).

    python dev/attention_bwd_breakdown.py --shapes "8,16,2048,128;1,16,16384,128" --causal 0

Prints, per shape and implementation, the average us per backward of every kernel the backward launches (the
forward runs outside the profiled region), and a line "TOP <impl> <kernel name>" naming the longest one, for
Nsight Compute's -k filter (dev/gpu_call_s36e.sh).
Why (session 36): the non-causal D = 128 Hopper backward fits ~2.47 us per query block of a key block plus ~15-22
us per key block per SM (bench/RESULTS.md, session 36), and making it persistent did not move it.
"""
import argparse
import os
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench.bench_attention import make_impl  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="8,16,2048,128;1,16,16384,128")
ap.add_argument("--causal", type=int, default=0)
ap.add_argument("--impls", default="tk,cudnn")
ap.add_argument("--iters", type=int, default=10)
args = ap.parse_args()
print(torch.cuda.get_device_name(), torch.__version__, "cudnn", torch.backends.cudnn.version())
for shape in args.shapes.split(";"):
    B, H, T, D = map(int, shape.split(","))
    q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    do = torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16)
    for impl in args.impls.split(","):
        fn = make_impl(impl)
        o = fn(q, k, v, bool(args.causal))
        for _ in range(3):
            torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.iters):
                torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
            torch.cuda.synchronize()
        tot = {}
        for e in prof.key_averages():
            t = getattr(e, "self_device_time_total", None)
            t = e.self_cuda_time_total if t is None else t
            if t > 0:
                tot[e.key] = tot.get(e.key, 0.0) + t / args.iters
        items = sorted(tot.items(), key=lambda kv: -kv[1])
        print(f"({B},{H},{T},{D}) causal={args.causal} {impl}: {sum(tot.values()):.1f} us per backward")
        for name, t in items:
            print(f"    {t:9.1f} us  {name[:150]}")
        print(f"TOP {impl} {items[0][0]}")
