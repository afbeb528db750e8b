"""The MLP family's column-sum kernel (csrc/colsum.cu) against what it replaced, one process, on a GPU:

    python dev/colsum_bench.py

do_bench medians (us) of the bias-gradient sums at the MLP's shapes (N = 16384 tokens, C = 768 / 1024 / 2048):
db_fc from the GELU' GEMM's (N / 64, 4C) fp32 block sums (was PyTorch's .sum(0)) and db_proj from dy (N, C)
bf16 (was a ones-row cuBLAS GEMM with an fp32 output; dy.sum(0, fp32) for scale), with the largest relative
difference between the ways.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tk_kernels.families.mlp import ops  # noqa: E402
from triton.testing import do_bench  # noqa: E402


def us(fn):
    return do_bench(fn, return_mode="median") * 1e3


def main():
    ext = ops._ext()
    print(torch.cuda.get_device_name(), torch.__version__)
    N = 16384
    for C in (768, 1024, 2048):
        sums = torch.randn(N // 64, 4 * C, device="cuda")
        dy = torch.randn(N, C, device="cuda", dtype=torch.bfloat16)
        ones = dy.new_ones((1, N))
        d1 = (ext.column_sums(sums) - sums.sum(0)).abs().max().item()
        d2 = (ext.column_sums(dy) - torch.mm(ones, dy, out_dtype=torch.float32)[0]).abs().max().item()
        print(f"C={C}: db_fc  torch .sum(0) {us(lambda: sums.sum(0)):.1f}  column_sums {us(lambda: ext.column_sums(sums)):.1f}"
              f"   | db_proj ones-GEMM {us(lambda: torch.mm(ones, dy, out_dtype=torch.float32)):.1f}  "
              f"dy.sum(0) {us(lambda: dy.sum(0, dtype=torch.float32)):.1f}  column_sums {us(lambda: ext.column_sums(dy)):.1f}"
              f"   (max |diff| {d1:.1e}, {d2:.1e})")


if __name__ == "__main__":
    main()
