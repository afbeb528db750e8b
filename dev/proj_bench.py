"""The attention projections (c_attn, c_proj) on our GEMM against cuBLAS, piece by piece, one process, on a GPU:

    python dev/proj_bench.py

At GPT-2's (C = 768) and GPT-2 medium's (C = 1024) shapes, N = 16384 tokens, bf16, do_bench medians (us):
the forward with bias (F.linear = cuBLAS with its bias epilogue, vs gemm_ STORE + bias), dX = dy W (torch.mm vs
gemm_ with W MN-major), dW (bf16 torch.mm + the fp32 cast autocast's backward adds, vs torch.mm with an fp32
output), db (Inductor's compiled sum, the ones-row GEMM, our column_sums), and the whole op fwd + bwd (torch.compile'd
F.linear under autocast with fp32 parameters vs tk_kernels.linear), with each output's largest relative difference.
"""
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tk_kernels  # noqa: E402
from tk_kernels.families.mlp import ops  # noqa: E402
from triton.testing import do_bench  # noqa: E402


def us(fn):
    return do_bench(fn, warmup=50, rep=300, return_mode="median") * 1e3


def rel(a, b):
    a, b = a.double(), b.double()
    return ((a - b).norm() / b.norm()).item()


def main():
    ext = ops._ext()
    print(torch.cuda.get_device_name(), torch.__version__)
    N = 16384
    compiled_sum = torch.compile(lambda t: t.sum(0, dtype=torch.float32))
    for C in (768, 1024):
        for name, M, K in (("c_attn", 3 * C, C), ("c_proj", C, C)):
            x = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
            w32 = torch.randn(M, K, device="cuda") * K ** -0.5
            b32 = torch.randn(M, device="cuda") * 0.1
            w, b = w32.bfloat16(), b32.bfloat16()
            dy = torch.randn(N, M, device="cuda", dtype=torch.bfloat16)
            y = torch.empty(N, M, device="cuda", dtype=torch.bfloat16)
            dx = torch.empty(N, K, device="cuda", dtype=torch.bfloat16)
            flop = 2 * N * M * K
            t_ref, t_tk = us(lambda: F.linear(x, w, b)), us(lambda: ext.gemm_(x, False, w, False, y, ops.STORE, b32))
            ext.gemm_(x, False, w, False, y, ops.STORE, b32)
            print(f"C={C} {name} fwd+bias: cuBLAS {t_ref:.1f} ({flop / t_ref / 1e6:.0f} TFLOP/s)  ours {t_tk:.1f} "
                  f"({flop / t_tk / 1e6:.0f})  ratio {t_ref / t_tk:.3f}  diff {rel(y, F.linear(x, w, b)):.1e}")
            t_ref, t_tk = us(lambda: torch.mm(dy, w)), us(lambda: ext.gemm_(dy, False, w, True, dx, ops.STORE))
            ext.gemm_(dy, False, w, True, dx, ops.STORE)
            print(f"C={C} {name} dX: cuBLAS {t_ref:.1f}  ours {t_tk:.1f}  ratio {t_ref / t_tk:.3f}  "
                  f"diff {rel(dx, torch.mm(dy, w)):.1e}")
            t_ref = us(lambda: torch.mm(dy.t(), x).float())
            t_tk = us(lambda: torch.mm(dy.t(), x, out_dtype=torch.float32))
            print(f"C={C} {name} dW: bf16 mm + cast {t_ref:.1f}  fp32-out mm {t_tk:.1f}  ratio {t_ref / t_tk:.3f}")
            ones = dy.new_ones((1, N))
            s_ref = dy.double().sum(0)
            print(f"C={C} {name} db: compiled sum {us(lambda: compiled_sum(dy)):.1f}  ones-row GEMM "
                  f"{us(lambda: torch.mm(ones, dy, out_dtype=torch.float32)):.1f}  column_sums "
                  f"{us(lambda: ext.column_sums(dy)):.1f}  (errors {rel(compiled_sum(dy), s_ref):.1e} / "
                  f"{rel(ext.column_sums(dy), s_ref):.1e})")
            xr = x.clone().requires_grad_()
            wr, br = w32.clone().requires_grad_(), b32.clone().requires_grad_()

            def ref_op(x_, w_, b_):
                with torch.autocast("cuda", dtype=torch.bfloat16):
                    return F.linear(x_, w_, b_)

            ref_c = torch.compile(ref_op)
            tk_c = torch.compile(lambda x_, w_, b_: tk_kernels.linear(x_, w_, b_))

            def step(fn):
                def run():
                    xr.grad = wr.grad = br.grad = None
                    fn(xr, wr, br).backward(dy)
                return run
            for f in (ref_c, tk_c):
                step(f)()
            t_ref, t_tk, t_eager = us(step(ref_c)), us(step(tk_c)), us(step(tk_kernels.linear))
            print(f"C={C} {name} op fwd+bwd: compiled F.linear (autocast, fp32 params) {t_ref:.1f}  compiled tk "
                  f"{t_tk:.1f}  eager tk {t_eager:.1f}  ratio {t_ref / t_tk:.3f}")


if __name__ == "__main__":
    main()
