"""Where the classifier's fwd+bwd wall time goes beyond its kernels' GPU time (issue 10).

bench/bench_classifier.py measured (session 9, C = 768): do_bench median 6.861 ms for ours, but the kernels' GPU time
sums to 6.445 ms (torch.compile: 7.417 vs 7.357). This script times one step several ways, side by side:
    do_bench with its L2 flush (the benchmark's number), CUDA events around each of 50 steps run back to back
    (median), CUDA events around 20 steps, and the host time per step (no synchronisation inside the 20 steps),
and lists the idle gaps between consecutive GPU kernels of one step from a torch.profiler trace, with the kernels
on both sides, plus each kernel's GPU time.

    python dev/classifier_timeline.py [--C 768 1024] [--N 16384] [--V 50304]
"""
import argparse
import json
import os
import sys
import tempfile
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def kernel_gaps(step, label):
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    path = os.path.join(tempfile.mkdtemp(), "trace.json")
    prof.export_chrome_trace(path)
    with open(path) as f:
        ev = json.load(f)["traceEvents"]
    kern = sorted((e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and "dur" in e),
                  key=lambda e: e["ts"])
    n = len(kern) // 3
    one = kern[n:2 * n]  # the middle step
    span = one[-1]["ts"] + one[-1]["dur"] - one[0]["ts"]
    busy = sum(e["dur"] for e in one)
    print(f"\n{label}: {len(one)} GPU ops in the middle step, span {span / 1e3:.3f} ms, busy {busy / 1e3:.3f} ms, "
          f"idle {(span - busy) / 1e3:.3f} ms")
    gaps = []
    for a, b in zip(one, one[1:]):
        g = b["ts"] - (a["ts"] + a["dur"])
        gaps.append((g, a["name"][:60], b["name"][:60]))
    gaps.sort(reverse=True)
    print("  largest gaps (us): " + "; ".join(f"{g:.1f} [{x} -> {y}]" for g, x, y in gaps[:8]))
    print(f"  gaps > 5 us: {sum(1 for g in gaps if g[0] > 5)}, their sum {sum(g[0] for g in gaps if g[0] > 5):.1f} us")
    for e in one:
        print(f"    {e['dur']:8.1f} us  {e['name'][:110]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--N", type=int, default=16384)
    ap.add_argument("--C", type=int, nargs="+", default=[768, 1024])
    ap.add_argument("--V", type=int, default=50304)
    args = ap.parse_args()
    from triton.testing import do_bench
    import torch.nn.functional as F
    import tk_kernels

    def eager_loss(x, w, t):
        return F.cross_entropy(F.linear(x, w).float(), t, ignore_index=-1)

    impls = {"tk": tk_kernels.linear_cross_entropy, "compile": torch.compile(eager_loss)}
    for C in args.C:
        x = torch.randn(args.N, C, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        w = (torch.randn(args.V, C, device="cuda") * C ** -0.5).to(torch.bfloat16).requires_grad_()
        t = torch.randint(0, args.V, (args.N,), device="cuda")
        for name, fn in impls.items():
            def step():
                fn(x, w, t).backward()
                x.grad = w.grad = None
            for _ in range(3):
                step()
            torch.cuda.synchronize()
            flush = do_bench(step, warmup=25, rep=200, return_mode="median")
            # do_bench without its L2 flush: CUDA events around each step, steps back to back
            ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(50)]
            for a, b in ev:
                a.record()
                step()
                b.record()
            torch.cuda.synchronize()
            each = sorted(a.elapsed_time(b) for a, b in ev)[25]
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            h0 = time.perf_counter()
            s.record()
            for _ in range(20):
                step()
            e.record()
            h1 = time.perf_counter()
            torch.cuda.synchronize()
            print(f"C={C} {name}: do_bench (L2 flush) {flush:.3f} ms; events per step, back to back, median "
                  f"{each:.3f} ms; 20 steps {s.elapsed_time(e) / 20:.3f} ms per step; host {(h1 - h0) / 20 * 1e3:.3f} "
                  f"ms per step (enqueue only)")
            kernel_gaps(step, f"C={C} {name}")
        del x, w, t
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
