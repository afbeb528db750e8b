"""Where the non-causal D = 128 backward's time goes at the long shapes, kernel by kernel, ours and cuDNN's, at
boost clocks (torch.profiler over back-to-back backward calls, no L2 flush between them):

    python dev/attention_bwd_long.py [--shapes "2,16,8192,128;1,16,16384,128"] [--calls 10]

Why (session 33): bench_attention.py put ours at 528 TFLOP/s at (2,16,8192,128) and 474 at (1,16,16384,128)
non-causal (cuDNN 530 / 552), but Nsight Compute (base clocks, one launch) timed our main kernel at 8.31M and
16.37M cycles there (per FLOP 1.5% FASTER at T = 16384) against cuDNN's 15.69M at T = 16384 (0.958x). This says
whether the gap of the benchmark lives in the main kernel at full clocks, in the small kernels, or between them.
"""
import argparse
import os
import sys
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.bench_attention import make_impl  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="2,16,8192,128;1,16,16384,128")
ap.add_argument("--calls", type=int, default=10)
args = ap.parse_args()
print(torch.cuda.get_device_name(), torch.__version__, flush=True)
for shape in args.shapes.split(";"):
    B, H, T, D = map(int, shape.split(","))
    flop = 2.5 * 4 * B * H * T * T * D
    for impl in ("tk", "cudnn", "tk", "cudnn"):
        fn = make_impl(impl)
        q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
        do = torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16)
        o = fn(q, k, v, False)
        for _ in range(3):
            torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            start.record()
            for _ in range(args.calls):
                torch.autograd.grad(o, (q, k, v), do, retain_graph=True)
            end.record()
            torch.cuda.synchronize()
        wall = start.elapsed_time(end) / args.calls
        per = defaultdict(float)
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                per[e.name[:60]] += e.device_time / args.calls / 1e3
        busy = sum(per.values())
        print(f"({B},{H},{T},{D}) {impl:5s} wall {wall:7.3f} ms/call ({flop / wall / 1e9:5.0f} TFLOP/s), kernels "
              f"{busy:7.3f} ms: " + ", ".join(f"{n} {t:.3f}" for n, t in sorted(per.items(), key=lambda x: -x[1])[:5]),
              flush=True)
        del q, k, v, do, o
