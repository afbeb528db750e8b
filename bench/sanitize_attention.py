"""
Driver for compute-sanitizer: every TK attention kernel once, at small odd shapes.

    compute-sanitizer --tool memcheck --error-exitcode 1 python bench/sanitize_attention.py
    TK_SMEM_LIMIT=101376 compute-sanitizer --tool racecheck ... python bench/sanitize_attention.py

bench/gpu_session.sh's `sanitize` step runs it under memcheck, racecheck and synccheck, with the
GPU's own shared-memory budget, an A100-sized one (166,912 B: the red.add dQ path) and the 99 KB
RTX-class one (101,376 B: the small configurations), and counts the errors.

Per case it runs the forward and the backward ops directly (tk::attention_fwd, tk::attention_bwd),
with q, k, v as strided views of one fused (B, T, 3, H, D) tensor as in model.py, in both
backward modes (atomic and deterministic dQ): T in (1, 17, 129), D in (64, 128), causal and not,
bf16 and fp16. Set PYTORCH_NO_CUDA_MEMORY_CACHING=1 (the session step does) so that memcheck sees
each tensor's own bounds rather than the caching allocator's blocks.
"""

import argparse
import math
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tk_kernels.families.attention import ops  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def run_case(B: int, H: int, T: int, D: int, causal: bool, dtype: torch.dtype,
             deterministic: bool) -> None:
    g = torch.Generator(device="cuda").manual_seed(T * 1000 + D)
    qkv = torch.randn(B, T, 3, H, D, device="cuda", dtype=dtype, generator=g)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    scale = 1.0 / math.sqrt(D)
    o, lse, rng = torch.ops.tk.attention_fwd(q, k, v, causal, scale, 0.0)
    dout = torch.randn(B, H, T, D, device="cuda", dtype=dtype, generator=g)
    grads = torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, causal, scale, deterministic, 0.0, rng)
    torch.cuda.synchronize()
    for name, t in zip(("o", "lse", "dq", "dk", "dv"), (o, lse, *grads)):
        if not torch.isfinite(t).all():
            raise RuntimeError(f"non-finite {name} at B={B} H={H} T={T} D={D} causal={causal} "
                               f"{dtype} deterministic={deterministic}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--seqlens", default="1,17,129")
    p.add_argument("--head-dims", default="64,128")
    p.add_argument("--dtypes", default="bf16,fp16")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=3)
    args = p.parse_args(argv)
    reason = ops.unavailable_reason()
    if reason is not None:
        print(f"error: {reason}", file=sys.stderr)
        return 1
    limit = os.environ.get("TK_SMEM_LIMIT", "")
    n = 0
    for dtype_name in args.dtypes.split(","):
        for D in (int(d) for d in args.head_dims.split(",")):
            for T in (int(t) for t in args.seqlens.split(",")):
                for causal in (True, False):
                    for deterministic in (False, True):
                        run_case(args.batch, args.heads, T, D, causal, DTYPES[dtype_name], deterministic)
                        n += 1
    print(f"sanitize_attention: {n} forward+backward cases ran on {torch.cuda.get_device_name()} "
          f"(TK_SMEM_LIMIT={limit or 'unset'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
