"""The MLP op's fwd+bwd at N = 16384 with its bias gradient as shipped (a ones-row GEMM, fp32 out) and as before
session 15 (dy.sum(0, dtype=fp32)), alternated ABAB in one process, with bf16 and with fp32 parameters:

    python dev/mlp_bias_grad_ab.py --C 768 1024

Session 15's bench_mlp had the op 0.43 ms slower at C = 768 than in session 14 (0.899 -> 1.329 ms) and not at
1024 / 2048; this tells whether the bias gradient's GEMM is the cause. Median ms of do_bench. Not shipped.
"""
import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--C", type=int, nargs="+", default=[768, 1024])
    p.add_argument("--N", type=int, default=16384)
    a = p.parse_args()
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    from triton.testing import do_bench
    import tk_kernels
    from tk_kernels.families.mlp import ops
    from mlp_host_time import fwd_bwd_step, mlp_inputs  # dev/, beside this script
    shipped = ops._bias_grad
    old = lambda dy, dtype: dy.sum(0, dtype=torch.float32).to(dtype)  # noqa: E731
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    for C in a.C:
        for pdt in (torch.bfloat16, torch.float32):
            step = fwd_bwd_step(tk_kernels.mlp, *mlp_inputs(a.N, C, pdt))
            times = {"ones-row mm": [], "dy.sum": []}
            for _ in range(2):
                for name, fn in (("ones-row mm", shipped), ("dy.sum", old)):
                    ops._bias_grad = fn
                    step()
                    times[name].append(do_bench(step, warmup=50, rep=200, return_mode="median"))
            ops._bias_grad = shipped
            print(f"  C={C} params {str(pdt)[6:]}: " + ", ".join(f"{k} {', '.join(f'{t:.3f}' for t in v)} ms"
                                                            for k, v in times.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
