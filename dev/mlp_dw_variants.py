"""The MLP family's weight gradients (dY^T x, fp32 out) on our split-K GEMM vs cuBLAS, inside the whole MLP
fwd + bwd, side by side in one process on a GPU.

    python dev/mlp_dw_variants.py            # N = 16384, C = 768 / 1024 / 2048, bf16

bench/RESULTS.md has our dY^T x at 0.84-0.93x cuBLAS while the other GEMMs are at 0.96-1.10x, and the MLP
fwd + bwd at 1.02x / 0.98x / 0.95x the faster of eager and torch.compile (issue 11 asks 1.1x). Two of the six
GEMMs of an MLP step are weight gradients; torch.mm(a.t(), b, out_dtype=torch.float32) (cuBLAS, fp32 output
from 16-bit inputs, PyTorch >= 2.8) gives the same fp32 gradient without the split-K atomics. Variants of
tk_kernels.families.mlp.ops._weight_grad, each timed as the MLP fwd + bwd (bench/bench_mlp.py's step and FLOP
count) and as the weight-gradient GEMMs alone, beside eager PyTorch and torch.compile; the dW of each variant is
compared with the shipped one's (rel-L2). Median ms of do_bench.
"""
from __future__ import annotations

import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))


def cublas_weight_grad(a, b, shape, dtype):
    out = torch.mm(a.t(), b, out_dtype=torch.float32)
    return out if dtype == torch.float32 else out.to(dtype)


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    from triton.testing import do_bench
    import tk_kernels
    from tk_kernels.families.mlp import ops as mlp_ops
    from bench_mlp import reference_mlp
    shipped = mlp_ops._weight_grad
    variants = {"shipped": shipped, "cublas_dw": cublas_weight_grad}
    bench = lambda fn: do_bench(fn, warmup=50, rep=200, return_mode="median")
    compiled = torch.compile(reference_mlp)
    dtype = torch.bfloat16
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, N = 16384")
    print(f"{'C':>5} | {'shipped':>9} {'cublas_dw':>10} {'eager':>9} {'compile':>9} | {'dW ours':>8} {'dW cuBLAS':>10}"
          f" | best tk vs best torch | dW rel-L2")
    for C in (768, 1024, 2048):
        N, H = 16384, 4 * C
        x = torch.randn(N, C, device="cuda", dtype=dtype, requires_grad=True)
        params = [(torch.randn(H, C, device="cuda") * C ** -0.5).to(dtype).requires_grad_(),
                  torch.zeros(H, device="cuda", dtype=dtype, requires_grad=True),
                  (torch.randn(C, H, device="cuda") * H ** -0.5).to(dtype).requires_grad_(),
                  torch.zeros(C, device="cuda", dtype=dtype, requires_grad=True)]
        dy = torch.randn(N, C, device="cuda", dtype=dtype)
        ms, grads = {}, {}

        def step(fn):
            fn(x, *params).backward(dy)
            g = [p.grad for p in params]
            x.grad = None
            for p in params:
                p.grad = None
            return g
        for name, wg in variants.items():
            mlp_ops._weight_grad = wg
            try:
                grads[name] = step(tk_kernels.mlp)
                ms[name] = bench(lambda: step(tk_kernels.mlp))
            finally:
                mlp_ops._weight_grad = shipped
        ms["eager"] = bench(lambda: step(reference_mlp))
        step(compiled)
        ms["compile"] = bench(lambda: step(compiled))
        h = torch.randn(N, H, device="cuda", dtype=dtype)
        t_dw = {n: bench(lambda: wg(dy, h, (C, H), torch.float32)) for n, wg in variants.items()}
        err = max(((a.double() - b.double()).norm() / b.double().norm()).item()
                  for a, b in zip(grads["cublas_dw"], grads["shipped"]) if b is not None)
        best_tk = min(ms["shipped"], ms["cublas_dw"])
        print(f"{C:>5} | {ms['shipped']:>9.3f} {ms['cublas_dw']:>10.3f} {ms['eager']:>9.3f} {ms['compile']:>9.3f} | "
              f"{t_dw['shipped']:>8.3f} {t_dw['cublas_dw']:>10.3f} | "
              f"{min(ms['eager'], ms['compile']) / best_tk:>6.3f}x ({'cublas_dw' if ms['cublas_dw'] < ms['shipped'] else 'shipped'})"
              f" | {err:.1e}", flush=True)
        x = params = dy = h = None  # free them before the next width
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
