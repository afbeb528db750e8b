"""The MLP op's PyTorch-side pieces that the GPT-2 124M step's profile shows (session 14, bench/RESULTS.md:
per step 0.398 ms for the c_proj bias gradient dy.sum(0), 0.251 for 48 fp32-to-bf16 weight casts, 0.147 for the
b_fc column-sum reduce), each timed beside cheaper ways of getting the same result, on a GPU:

    python dev/mlp_overheads.py            # N = 16384, C = 768 (GPT-2 124M), bf16

Bias gradient of (N, C) bf16 dy, fp32 out: dy.sum(0, dtype=fp32) | a ones-row GEMM with an fp32 output (cuBLAS,
torch.mm(ones(1, N), dy, out_dtype=fp32)) | a fp32 view sum of 64-row blocks then of the blocks. The b_fc reduce:
the (N/64, 4C) fp32 block sums .sum(0) | a ones-row fp32 GEMM with TF32 off. Each variant's result is compared
with a float64 reference (relative L2). Median ms of do_bench. Not shipped.
"""
import sys

import torch


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    from triton.testing import do_bench
    torch.backends.cuda.matmul.allow_tf32 = False
    bench = lambda fn: do_bench(fn, warmup=25, rep=100, return_mode="median")  # noqa: E731
    N, C = 16384, 768
    H = 4 * C
    g = torch.Generator(device="cuda").manual_seed(0)
    dy = torch.randn(N, C, device="cuda", generator=g).to(torch.bfloat16)
    ones = torch.ones(1, N, device="cuda", dtype=torch.bfloat16)
    ref = dy.double().sum(0)
    rel = lambda a: ((a.double() - ref).norm() / ref.norm()).item()  # noqa: E731
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}: bias gradient of ({N}, {C}) bf16, fp32 out")
    variants = {
        "dy.sum(0, fp32)": lambda: dy.sum(0, dtype=torch.float32),
        "ones-row mm, fp32 out": lambda: torch.mm(ones, dy, out_dtype=torch.float32)[0],
        "64-row blocks, then blocks": lambda: dy.view(N // 64, 64, C).sum(1, dtype=torch.float32).sum(0),
    }
    for name, fn in variants.items():
        print(f"  {name:<28} {bench(fn) * 1e3:8.1f} us   rel-L2 {rel(fn()):.1e}")
    sums = torch.randn(N // 64, H, device="cuda", generator=g)
    ones32 = torch.ones(1, N // 64, device="cuda")
    ref = sums.double().sum(0)
    print(f"b_fc: ({N // 64}, {H}) fp32 block sums")
    for name, fn in {"sums.sum(0)": lambda: sums.sum(0), "ones-row mm (fp32, no TF32)": lambda: torch.mm(ones32, sums)[0]}.items():
        print(f"  {name:<28} {bench(fn) * 1e3:8.1f} us   rel-L2 {rel(fn()):.1e}")
    w = torch.randn(H, C, device="cuda", generator=g)
    print(f"weight cast ({H}, {C}) fp32 -> bf16: {bench(lambda: w.to(torch.bfloat16)) * 1e3:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
