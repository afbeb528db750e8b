"""The MLP family's Hopper GEMM (tk_mlp gemm_, cluster pairs, epilogue warpgroup) at the classifier's shapes,
beside cuBLAS, one process, on a GPU:

    python dev/classifier_shapes_gemm.py

Why (session 27): the fused classifier prototype (dev/hopper/classifier_fused.cu) was correct but 0.81x the family
op, its own GEMMs trailing cuBLAS (logits + E 402 TFLOP/s against cuBLAS's 641 for the logits alone, dW 362 against
623, H100). Before another fused design: does the family GEMM, the one that holds cuBLAS's pace at the MLP's
shapes, also hold it at the classifier's? Per chunk of R rows (R = 2048, the family's chunk, and 16384), V = 50304:
  logits  L (R, V) = x (R, C) W (V, C)^T          gemm_(x, False, W, False, L, STORE)  vs torch.mm(x, W.t())
  dx      (R, C)   = G (R, V) W (V, C)            gemm_(G, False, W, True, dx, STORE)  vs torch.mm(G, W)
  dW      (V, C)   = G^T (V, R) x (R, C), fp32    gemm_(G, True, x, True, dW, STORE_F32) vs torch.mm(G.t(), x, fp32 out)
do_bench medians (us) and TFLOP/s, bf16 operands from randn, each output's relative L2 difference to cuBLAS's.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from dev.proj_bench import rel, us  # noqa: E402  (the same do_bench medians and relative L2 as the projections')
from tk_kernels.families.mlp import ops  # noqa: E402


def row(name, flop, t_ref, t_tk, diff):
    print(f"{name:34s} cuBLAS {t_ref:8.1f} us ({flop / t_ref / 1e6:4.0f} TFLOP/s)  ours {t_tk:8.1f} us "
          f"({flop / t_tk / 1e6:4.0f})  ours/cuBLAS time {t_tk / t_ref:.3f}  diff {diff:.1e}", flush=True)


def main():
    ext = ops._ext()
    print(torch.cuda.get_device_name(), torch.__version__, flush=True)
    V = 50304
    for C in (768, 1024):
        W = (torch.randn(V, C, device="cuda") * C ** -0.5).bfloat16()
        for R in (2048, 16384):
            x = torch.randn(R, C, device="cuda", dtype=torch.bfloat16)
            G = (torch.randn(R, V, device="cuda") * 1e-3).bfloat16()
            flop = 2 * R * V * C
            L = torch.full((R, V), float("nan"), device="cuda", dtype=torch.bfloat16)
            ext.gemm_(x, False, W, False, L, ops.STORE)
            row(f"C={C} R={R} logits", flop, us(lambda: torch.mm(x, W.t())),
                us(lambda: ext.gemm_(x, False, W, False, L, ops.STORE)), rel(L, torch.mm(x, W.t())))
            dx = torch.full((R, C), float("nan"), device="cuda", dtype=torch.bfloat16)
            ext.gemm_(G, False, W, True, dx, ops.STORE)
            row(f"C={C} R={R} dx", flop, us(lambda: torch.mm(G, W)),
                us(lambda: ext.gemm_(G, False, W, True, dx, ops.STORE)), rel(dx, torch.mm(G, W)))
            dW = torch.zeros(V, C, device="cuda", dtype=torch.float32)
            splits = ext.splits(V, C, R, torch.cuda.get_device_properties(0).multi_processor_count)

            def ours_dw():
                if splits != 1:
                    dW.zero_()
                ext.gemm_(G, True, x, True, dW, ops.STORE_F32, splits=splits)

            ours_dw()
            ref = torch.mm(G.t(), x, out_dtype=torch.float32)
            row(f"C={C} R={R} dW fp32 (splits {splits})", flop, us(lambda: torch.mm(G.t(), x, out_dtype=torch.float32)),
                us(ours_dw), rel(dW, ref))
            del G, L


if __name__ == "__main__":
    main()
