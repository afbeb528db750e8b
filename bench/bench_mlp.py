"""
The MLP family on one GPU, side by side in one process: our Hopper GEMM against cuBLAS (torch.mm)
in each layout the MLP uses, then the MLP forward + backward against eager PyTorch and
torch.compile of the same PyTorch code.

    python bench/bench_mlp.py [--json out.json] [--png out.png] [--C 768 1024 2048] [--N 16384]

GEMMs: TFLOP/s = 2 M N K / median time. Layouts: "x W^T" (forward), "dy W" (backward data: W read
as an MN-major operand), "dy^T x" (weight gradient: both operands MN-major, fp32 out, K = tokens).
MLP: y = c_proj(gelu(c_fc(x))) with biases, exact (erf) GELU, bf16 activations, weights and
biases; fwd + bwd (y.backward(dy): dx and every parameter gradient); TFLOP/s counts 3x the forward
GEMM FLOPs (2 GEMMs x 2 N C 4C). Times: triton.testing.do_bench medians (L2 flushed between runs).
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

GEMM_SHAPES = [  # (layout, M, N, K)
    ("x W^T", 8192, 8192, 8192),
    ("x W^T", 16384, 3072, 768), ("x W^T", 16384, 768, 3072), ("x W^T", 16384, 2304, 768),
    ("x W^T", 16384, 768, 768), ("x W^T", 16384, 4096, 1024), ("x W^T", 16384, 1024, 4096),
    ("dy W", 16384, 768, 3072), ("dy W", 16384, 3072, 768), ("dy W", 16384, 1024, 4096),
    ("dy^T x", 768, 3072, 16384), ("dy^T x", 3072, 768, 16384), ("dy^T x", 1024, 4096, 16384),
    ("+gelu", 16384, 3072, 768), ("dy W*gelu'", 16384, 3072, 768),
    # GPT-2 medium's (C = 1024) shapes that the 124M rows above do not cover
    ("x W^T", 16384, 3072, 1024), ("dy W", 16384, 4096, 1024),
    ("+gelu", 16384, 4096, 1024), ("dy W*gelu'", 16384, 4096, 1024),
    # the MLP table's C = 2048 (session 50: its ratio is bounded by these plain GEMMs against cuBLAS)
    ("x W^T", 16384, 8192, 2048), ("x W^T", 16384, 2048, 8192), ("dy W", 16384, 2048, 8192),
    ("+gelu", 16384, 8192, 2048), ("dy W*gelu'", 16384, 8192, 2048),
]


def reference_mlp(x, w_fc, b_fc, w_proj, b_proj):
    return F.linear(F.gelu(F.linear(x, w_fc, b_fc)), w_proj, b_proj)


def gemm_fns(layout, M, N, K, dtype):
    """(ours, cublas) closures computing the same product from the same stored operands."""
    from tk_kernels.families.mlp import ops
    ext = ops._ext()
    r = lambda *s: torch.randn(*s, device="cuda", dtype=dtype)
    if layout == "x W^T":
        a, b = r(M, K), r(N, K)
        c = torch.empty(M, N, device="cuda", dtype=dtype)
        return (lambda: ext.gemm_(a, False, b, False, c, ops.STORE)), (lambda: torch.mm(a, b.t(), out=c))
    if layout == "dy W":
        a, b = r(M, K), r(K, N)  # dy (M, K) and W (K, N): nn.Linear's (out, in) weight of out = K
        c = torch.empty(M, N, device="cuda", dtype=dtype)
        return (lambda: ext.gemm_(a, False, b, True, c, ops.STORE)), (lambda: torch.mm(a, b, out=c))
    if layout == "+gelu":  # x W^T + b -> gelu(pre) and gelu'(pre); cuBLAS: addmm, then F.gelu (eager)
        a, b, bias = r(M, K), r(N, K), torch.zeros(N, device="cuda")
        c, pre = (torch.empty(M, N, device="cuda", dtype=dtype) for _ in range(2))  # ours writes gelu'(pre) to `pre`
        b16 = bias.to(dtype)
        return ((lambda: ext.gemm_(a, False, b, False, c, ops.GELU, bias, pre)),
                (lambda: F.gelu(torch.addmm(b16, a, b.t(), out=pre))))
    if layout == "dy W*gelu'":  # (dy W) * gelu'(pre): ours multiplies by the saved gelu'; cuBLAS: mm, then the GELU
        # backward (eager) from pre
        a, b, pre = r(M, K), r(K, N), r(M, N)
        c = torch.empty(M, N, device="cuda", dtype=dtype)
        return ((lambda: ext.gemm_(a, False, b, True, c, ops.DGELU, None, pre)),
                (lambda: torch.ops.aten.gelu_backward(torch.mm(a, b), pre)))
    a, b = r(K, M), r(K, N)  # dy (tokens, M), x (tokens, N)
    c32 = torch.zeros(M, N, device="cuda", dtype=torch.float32)
    c16 = torch.empty(M, N, device="cuda", dtype=dtype)

    def ours():
        c32.zero_()
        ext.gemm_(a, True, b, True, c32, ops.STORE_F32)
    return ours, (lambda: torch.mm(a.t(), b, out=c16))


def profile_step(step, title: str = "one tk MLP step"):
    """Print the GPU time of each kernel of one step (after warm-up), largest first."""
    from torch.profiler import ProfilerActivity, profile
    for _ in range(3):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    events = [e for e in prof.key_averages() if e.device_type.name == "CUDA" and e.self_device_time_total > 0]
    events.sort(key=lambda e: -e.self_device_time_total)
    print(f"\nper-kernel GPU time of {title} (mean of 5):")
    for e in events[:20]:
        print(f"  {e.self_device_time_total / 5 / 1000:8.3f} ms  x{e.count // 5:<3} {e.key[:110]}")
    print(f"  total {sum(e.self_device_time_total for e in events) / 5 / 1000:.3f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].strip())
    ap.add_argument("--N", type=int, default=16384)
    ap.add_argument("--C", type=int, nargs="+", default=[768, 1024, 2048])
    ap.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    ap.add_argument("--skip-gemm", action="store_true", help="only the MLP table")
    ap.add_argument("--profile", action="store_true", help="per-kernel GPU time of one tk MLP step (torch.profiler)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--png", default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("bench_mlp: needs a CUDA GPU")
    from triton.testing import do_bench
    import tk_kernels
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    bench = lambda fn: do_bench(fn, warmup=50, rep=200, return_mode="median")
    gemms = []
    if not args.skip_gemm:
        for layout, M, N, K in GEMM_SHAPES:
            ours, cublas = gemm_fns(layout, M, N, K, dtype)
            t_ours, t_cublas = bench(ours), bench(cublas)
            flop = 2 * M * N * K
            gemms.append(dict(layout=layout, M=M, N=N, K=K, ours_ms=t_ours, cublas_ms=t_cublas,
                              ours_tflops=flop / t_ours / 1e9, cublas_tflops=flop / t_cublas / 1e9,
                              ratio=t_cublas / t_ours))
            torch.cuda.empty_cache()
    compiled = torch.compile(reference_mlp)
    impls = {"tk": tk_kernels.mlp, "eager": reference_mlp, "compile": compiled}
    mlps = []
    for C in args.C:
        N, H = args.N, 4 * C
        x = torch.randn(N, C, device="cuda", dtype=dtype, requires_grad=True)
        params = [(torch.randn(H, C, device="cuda") * C ** -0.5).to(dtype).requires_grad_(),
                  torch.zeros(H, device="cuda", dtype=dtype, requires_grad=True),
                  (torch.randn(C, H, device="cuda") * H ** -0.5).to(dtype).requires_grad_(),
                  torch.zeros(C, device="cuda", dtype=dtype, requires_grad=True)]
        dy = torch.randn(N, C, device="cuda", dtype=dtype)
        row = dict(N=N, C=C, dtype=args.dtype)
        for name, fn in impls.items():
            def step():
                fn(x, *params).backward(dy)
                x.grad = None
                for p in params:
                    p.grad = None
            step()
            step()
            ms = bench(step)
            row[f"{name}_ms"] = ms
            row[f"{name}_tflops"] = 3 * 2 * 2 * N * C * H / ms / 1e9
        if args.profile and C == args.C[0]:
            profile_step(lambda: (tk_kernels.mlp(x, *params).backward(dy), setattr(x, "grad", None)))
        best = min(row["eager_ms"], row["compile_ms"])
        row["speedup_vs_best"] = best / row["tk_ms"]
        mlps.append(row)
        del x, params, dy
        torch.cuda.empty_cache()

    gpu = torch.cuda.get_device_name()
    print(f"bench_mlp on {gpu}, torch {torch.__version__}, CUDA {torch.version.cuda}, {args.dtype}")
    if gemms:
        print(f"\n{'layout':<8} {'M':>6} {'N':>6} {'K':>6} | {'ours TFLOP/s':>12} {'cuBLAS':>8} | ours/cuBLAS")
        for g in gemms:
            print(f"{g['layout']:<8} {g['M']:>6} {g['N']:>6} {g['K']:>6} | {g['ours_tflops']:>12.0f} "
                  f"{g['cublas_tflops']:>8.0f} | {g['ratio']:.3f}x")
    print(f"\nMLP fwd+bwd, median ms (TFLOP/s at 3x forward FLOPs)")
    print(f"{'N':>6} {'C':>5} | {'tk':>15} {'eager':>15} {'compile':>15} | vs best")
    for r in mlps:
        cells = [f"{r[f'{n}_ms']:.3f} ({r[f'{n}_tflops']:.0f})" for n in impls]
        print(f"{r['N']:>6} {r['C']:>5} | {cells[0]:>15} {cells[1]:>15} {cells[2]:>15} | {r['speedup_vs_best']:.3f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=gpu, torch=torch.__version__, cuda=torch.version.cuda, gemm=gemms, mlp=mlps), f,
                      indent=1)
        print(f"wrote {args.json}")
    if args.png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(12, 4))
        if gemms:
            labels = [f"{g['layout']}\n{g['M']}x{g['N']}x{g['K']}" for g in gemms]
            xs = range(len(gemms))
            axes[0].bar([i - 0.2 for i in xs], [g["ours_tflops"] for g in gemms], 0.4, label="ours", color="#c33")
            axes[0].bar([i + 0.2 for i in xs], [g["cublas_tflops"] for g in gemms], 0.4, label="cuBLAS", color="#888")
            axes[0].set_xticks(list(xs), labels, rotation=60, fontsize=6)
            axes[0].set_ylabel("TFLOP/s")
            axes[0].legend()
            axes[0].set_title("GEMM")
        xs = range(len(mlps))
        for j, (name, color) in enumerate((("tk", "#c33"), ("eager", "#888"), ("compile", "#444"))):
            axes[1].bar([i + (j - 1) * 0.27 for i in xs], [r[f"{name}_tflops"] for r in mlps], 0.27, label=name,
                        color=color)
        axes[1].set_xticks(list(xs), [f"C={r['C']}" for r in mlps])
        axes[1].set_ylabel("TFLOP/s (3x fwd FLOPs)")
        axes[1].set_title(f"MLP fwd+bwd, N={args.N}")
        axes[1].legend()
        fig.tight_layout()
        fig.savefig(args.png, dpi=120)
        print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
