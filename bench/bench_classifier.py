"""
Benchmark of the classifier (lm_head GEMM + cross-entropy), forward + backward, on one GPU:
ours (tk_kernels.linear_cross_entropy) vs eager PyTorch (F.linear + F.cross_entropy on .float()
logits) vs torch.compile of the same, side by side, as triton.testing.do_bench medians, plus each
one's extra peak memory (torch.cuda.max_memory_allocated over what was allocated before the step).

    python bench/bench_classifier.py [--json out.json] [--png out.png] [--C 768 1024] [--N 16384] [--V 50304]
    python bench/bench_classifier.py --C 768 --profile    # + the GPU time of each kernel of ours and compile's
"""

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


def eager_loss(x, w, t):
    return F.cross_entropy(F.linear(x, w).float(), t, ignore_index=-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    ap.add_argument("--N", type=int, default=16384)
    ap.add_argument("--C", type=int, nargs="+", default=[768, 1024])
    ap.add_argument("--V", type=int, default=50304)
    ap.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    ap.add_argument("--json", default=None)
    ap.add_argument("--png", default=None)
    ap.add_argument("--profile", action="store_true",
                    help="per-kernel GPU time of one fwd+bwd of ours and of torch.compile's, at the first C (torch.profiler)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_classifier: needs a CUDA GPU")
    from triton.testing import do_bench
    import tk_kernels
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    compiled_loss = torch.compile(eager_loss)
    impls = {"tk": tk_kernels.linear_cross_entropy, "eager": eager_loss, "compile": compiled_loss}
    results = []
    for C in args.C:
        x = torch.randn(args.N, C, device="cuda", dtype=dtype, requires_grad=True)
        w = (torch.randn(args.V, C, device="cuda") * C ** -0.5).to(dtype).requires_grad_()
        t = torch.randint(0, args.V, (args.N,), device="cuda")
        row = {"N": args.N, "C": C, "V": args.V, "dtype": args.dtype}
        for name, fn in impls.items():
            def step():
                fn(x, w, t).backward()
                x.grad = w.grad = None
            step()
            step()  # warm-up (compile, build, cuBLAS workspaces)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            before = torch.cuda.memory_allocated()
            step()
            torch.cuda.synchronize()
            row[f"{name}_peak_gb"] = (torch.cuda.max_memory_allocated() - before) / 1e9
            row[f"{name}_ms"] = do_bench(step, warmup=25, rep=200, return_mode="median")
            if args.profile and C == args.C[0] and name in ("tk", "compile"):
                from bench.bench_mlp import profile_step
                profile_step(step, f"one {name} classifier fwd+bwd, N={args.N} C={C} V={args.V}")
        row["speedup_vs_compile"] = row["compile_ms"] / row["tk_ms"]
        row["speedup_vs_eager"] = row["eager_ms"] / row["tk_ms"]
        results.append(row)
        del x, w, t
        torch.cuda.empty_cache()

    print(f"classifier fwd+bwd on {torch.cuda.get_device_name()}, {args.dtype}, median ms (extra peak GB)")
    print(f"{'N':>6} {'C':>5} {'V':>6} | {'tk':>15} {'eager':>15} {'compile':>15} | vs compile  vs eager")
    for r in results:
        cells = [f"{r[f'{n}_ms']:7.3f} ({r[f'{n}_peak_gb']:5.2f})" for n in impls]
        print(f"{r['N']:>6} {r['C']:>5} {r['V']:>6} | {cells[0]:>15} {cells[1]:>15} {cells[2]:>15} | "
              f"{r['speedup_vs_compile']:9.2f}x {r['speedup_vs_eager']:8.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "results": results}, f, indent=2)
        print(f"wrote {args.json}")
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 4))
        labels = [f"C={r['C']}" for r in results]
        width = 0.25
        for i, n in enumerate(impls):
            xs = [j + (i - 1) * width for j in range(len(results))]
            ax_t.bar(xs, [r[f"{n}_ms"] for r in results], width, label=n)
            ax_m.bar(xs, [r[f"{n}_peak_gb"] for r in results], width, label=n)
        for ax, title in ((ax_t, "fwd+bwd time (ms, median)"), (ax_m, "extra peak memory (GB)")):
            ax.set_xticks(range(len(results)), labels)
            ax.set_title(title)
            ax.legend()
        fig.suptitle(f"classifier N={args.N} V={args.V} {args.dtype}, {torch.cuda.get_device_name()}")
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
        print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
