"""
CPU simulation of the fused classifier's bf16 dW rounding (tk_kernels/families/classifier/ops.py) against
PyTorch's own bf16 path, both measured against float64: how our error grows with the chunk count.

Models, all in float64 with bf16 rounding where the GPU rounds (a GEMM's fp32 accumulation is taken as
exact: its error is ~1e-6 against bf16's ~1e-3):
    reference  logits rounded to bf16 (the precision the op promises), everything else float64
    ours       g = bf16(softmax - onehot) per chunk; dw = bf16(g^T x_c / n + dw) per chunk (the addmm
               with beta = 1 reads the bf16 dw back: one rounding per chunk); the backward's
               bf16(dw * n / count)
    torch      g = bf16((softmax - onehot) / count) (F.cross_entropy's fp32 grad cast for F.linear's
               backward); dW = bf16(g^T x) in one GEMM: one rounding
    rounded    bf16(reference): the best any bf16 dW can do (so ours / torch <= ours / rounded)
The chunk count is set directly (the op picks it from V: 2048 rows per chunk at V = 50304), so small
V and C can stand in for the GPT-2 sizes. Inputs as tests/classifier/test_classifier_gpu.py draws them.

    python dev/classifier_dw_rounding.py                                   # V=2048 C=128, 256 rows/chunk
    python dev/classifier_dw_rounding.py --rows 2048 --C 32 --V 50304 --chunks 8 --seeds 3

Results on the CPU machine (mean rel-L2 dW errors; ratios min-max over the seeds):

    V, C, rows per chunk, seeds   chunks  rounded   ours     ours/rounded  torch/rounded  ours/torch
    2048, 128, 256, 10 (default)       1  1.66e-3   2.40e-3  1.43-1.47     1.30-2.08      0.70-1.10
                                       2  1.66e-3   2.68e-3  1.59-1.63     1.07-1.84      0.88-1.51
                                       4  1.66e-3   3.16e-3  1.85-1.93     1.07-1.90      0.99-1.73
                                       8  1.66e-3   3.92e-3  2.35-2.38     1.12-2.12      1.11-2.10
                                      16  1.66e-3   5.10e-3  3.04-3.09     1.12-1.91      1.61-2.74
                                      32  1.66e-3   6.83e-3  4.09-4.14     1.07-2.11      1.95-3.85
                                      64  1.66e-3   9.37e-3  5.63-5.69     1.09-2.03      2.77-5.19
    50304, 32, 2048, 3                 1  1.66e-3   2.35e-3  1.41-1.44     1.00-1.21      1.18-1.41
                                       8  1.66e-3   4.30e-3  2.58-2.59     1.14-1.40      1.86-2.28
    32771, 64, 2048, 2                32  1.66e-3   8.34e-3  5.02-5.03     1.01-1.49      3.38-4.97
    50304, 32, 1000, 4                 1  1.66e-3   2.28e-3  1.36-1.39     1.01-2.21      0.63-1.36
    50304, 64, 7, 10                   1  1.60e-3   1.60e-3  1.00-1.01     1.13-1.71      0.59-0.89
    65, 64, 1, 30                      1  1.50e-3   1.82e-3  1.02-1.70     1.02-1.70      1.00-1.00

Ours is stable against the correctly rounded dW (the final bf16(dw * n / count) makes 1 chunk ~1.4x; each
chunk adds a rounding); PyTorch's error is 1.0-2.3x the rounded one from input to input (it depends on the
token count it divides by before its bf16 cast), which makes ours / torch noisy. The rows per chunk and V
matter a little (2.36 vs 2.59 at 8 chunks). tests/classifier/test_classifier_gpu.py bounds both ratios by
1.2 x sqrt(1.6 + 0.75 chunks).
"""

import argparse

import torch


def bf16(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.bfloat16).to(torch.float64)


def rel(a: torch.Tensor, ref: torch.Tensor) -> float:
    return ((a - ref).norm() / ref.norm()).item()


def one_case(n_chunks: int, rows: int, C: int, V: int, seed: int, ignore_frac: float = 0.1):
    """(ours, torch, rounded): the rel-L2 dW errors of the three models for one random input."""
    g = torch.Generator().manual_seed(seed)
    N = n_chunks * rows
    x = bf16(torch.randn(N, C, generator=g, dtype=torch.float64))
    w = bf16(torch.randn(V, C, generator=g, dtype=torch.float64) * (2.0 / C ** 0.5))
    t = torch.randint(0, V, (N,), generator=g)
    keep = torch.rand(N, generator=g) >= ignore_frac
    keep[0] |= not keep.any()  # as the GPU test: at least one target
    count = keep.sum().item()
    ref = torch.zeros(V, C, dtype=torch.float64)
    ours = torch.zeros_like(ref)
    torch_acc = torch.zeros_like(ref)  # PyTorch's one GEMM, accumulated exactly
    for c in range(n_chunks):
        sl = slice(c * rows, (c + 1) * rows)
        p = bf16(x[sl] @ w.t()).softmax(-1)                # from the GEMM's bf16 logits
        p[torch.arange(rows), t[sl]] -= 1.0
        p[~keep[sl]] = 0.0                                 # softmax - onehot, 0 on ignored rows
        ref += p.t() @ x[sl]
        ours = bf16(bf16(p).t() @ x[sl] / n_chunks + ours)  # addmm: alpha = 1/n, beta = 1, one rounding
        torch_acc += bf16(p / count).t() @ x[sl]
    ref /= count
    ours = bf16(ours * (n_chunks / count))
    return rel(ours, ref), rel(bf16(torch_acc), ref), rel(bf16(ref), ref)


def span(xs) -> str:
    return f"{min(xs):.2f}-{max(xs):.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    ap.add_argument("--chunks", default="1,2,4,8,16,32,64")
    ap.add_argument("--rows", type=int, default=256, help="rows per chunk")
    ap.add_argument("--C", type=int, default=128)
    ap.add_argument("--V", type=int, default=2048)
    ap.add_argument("--seeds", type=int, default=10)
    args = ap.parse_args()
    print(f"rows per chunk {args.rows}, C={args.C}, V={args.V}, {args.seeds} seeds; rel-L2 error of dW vs float64")
    print(f"{'chunks':>6} {'rounded':>8} {'ours':>8} {'ours/rounded':>13} {'torch/rounded':>14} {'ours/torch':>11}")
    for n in (int(s) for s in args.chunks.split(",")):
        res = [one_case(n, args.rows, args.C, args.V, seed) for seed in range(args.seeds)]
        mean = lambda i: sum(r[i] for r in res) / len(res)  # noqa: E731
        print(f"{n:>6} {mean(2):>8.2e} {mean(0):>8.2e} {span([o / r for o, _, r in res]):>13} "
              f"{span([t / r for _, t, r in res]):>14} {span([o / t for o, t, _ in res]):>11}", flush=True)


if __name__ == "__main__":
    main()
