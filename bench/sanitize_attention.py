"""
Driver for compute-sanitizer: every TK attention kernel, dropout included, at small odd shapes.

    compute-sanitizer --tool memcheck --error-exitcode 1 python bench/sanitize_attention.py
    TK_SMEM_LIMIT=101376 compute-sanitizer --tool racecheck ... python bench/sanitize_attention.py

bench/gpu_session.sh's `sanitize` step runs it under memcheck, racecheck and synccheck, with the
GPU's own shared-memory budget, an A100-sized one (166,912 B: the red.add dQ path) and the 99 KB
RTX-class one (101,376 B: the small configurations), and counts the errors.

Kernel paths: per pass the script forces one path with TK_ATTENTION_PATH and TK_ATTENTION_BWD and checks
(ops.forward_path / backward_path) that every case takes it:
    hopper    hopper_forward.cu + hopper_backward.cu (the default on an sm_90 GPU built for sm_90a)
    portable  forward.cu + backward*.cu (what an A100 or an RTX-class GPU runs)
By default it runs both where the Hopper kernels can run, else the portable pass. TK_SMEM_LIMIT configures
only the portable backward (configs.cu: device_budget), so with it set only the portable pass runs (on an
H200 the default backward would otherwise be the Hopper one, which ignores the limit); --paths hopper
with TK_SMEM_LIMIT set is refused.

Per case it runs the forward and the backward ops directly (tk::attention_fwd, tk::attention_bwd),
with q, k, v as strided views of one fused (B, T, 3, H, D) tensor as in model.py: T in (1, 17, 129),
D in (64, 128), causal and not, bf16 and fp16, dropout p in (0, 0.2) (the dropout instances of every
kernel), backward with atomic dQ and, on the portable pass, deterministic dQ too (the deterministic
backward is always the portable one). Then the debug mask kernel (ops.dropout_mask) once per T.
Cases per pass with the defaults: hopper 48, portable 96. Set PYTORCH_NO_CUDA_MEMORY_CACHING=1 (the
session step does) so that memcheck sees each tensor's own bounds rather than the caching allocator's blocks.
"""

import argparse
import math
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from tk_kernels.families.attention import ops  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}
PATHS = {"hopper": "hopper_forward.cu + hopper_backward.cu", "portable": "forward.cu + backward*.cu"}


def run_case(B: int, H: int, T: int, D: int, causal: bool, dtype: torch.dtype, dropout_p: float,
             deterministic: bool, path: str) -> None:
    g = torch.Generator(device="cuda").manual_seed(T * 1000 + D)
    qkv = torch.randn(B, T, 3, H, D, device="cuda", dtype=dtype, generator=g)
    q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
    label = (f"B={B} H={H} T={T} D={D} causal={causal} {dtype} p={dropout_p} deterministic={deterministic} "
             f"path={path}")
    # the kernels this case must take (TK_ATTENTION_PATH / TK_ATTENTION_BWD are set by the pass)
    fwd = ops.forward_path(q, dropout_p, k, v)
    bwd = ops.backward_path(q, dropout_p, deterministic, k, v)
    if fwd != path or bwd != ("portable" if deterministic else path):
        raise RuntimeError(f"{label}: the ops took forward {fwd}, backward {bwd}")
    scale = 1.0 / math.sqrt(D)
    o, lse, rng = torch.ops.tk.attention_fwd(q, k, v, causal, scale, dropout_p)
    dout = torch.randn(B, H, T, D, device="cuda", dtype=dtype, generator=g)
    grads = torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, causal, scale, deterministic, dropout_p, rng)
    torch.cuda.synchronize()
    for name, t in zip(("o", "lse", "dq", "dk", "dv"), (o, lse, *grads)):
        if not torch.isfinite(t).all():
            raise RuntimeError(f"non-finite {name} at {label}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--seqlens", default="1,17,129")
    p.add_argument("--head-dims", default="64,128")
    p.add_argument("--dtypes", default="bf16,fp16")
    p.add_argument("--dropout", default="0,0.2", help="dropout probabilities (0 = the kernels without dropout)")
    p.add_argument("--paths", default="auto",
                   help="hopper,portable (default auto: both where the Hopper kernels can run and TK_SMEM_LIMIT "
                        "is unset, else portable)")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=3)
    args = p.parse_args(argv)
    reason = ops.unavailable_reason()
    if reason is not None:
        print(f"error: {reason}", file=sys.stderr)
        return 1
    device = torch.device("cuda", torch.cuda.current_device())
    limit = os.environ.get("TK_SMEM_LIMIT", "")
    hopper_reason = ops.hopper_reason(device)
    if args.paths == "auto":
        paths = ["portable"] if limit or hopper_reason is not None else ["hopper", "portable"]
        if not limit and hopper_reason is not None:
            print(f"sanitize_attention: no Hopper pass ({hopper_reason})")
    else:
        paths = [s.strip() for s in args.paths.split(",") if s.strip()]
        bad = [s for s in paths if s not in PATHS]
        if bad or not paths:
            print(f"error: --paths takes hopper and/or portable, got {args.paths!r}", file=sys.stderr)
            return 2
        if "hopper" in paths and limit:
            print(f"error: TK_SMEM_LIMIT={limit} configures only the portable backward; a hopper pass would not "
                  "test it (use --paths portable)", file=sys.stderr)
            return 2
        if "hopper" in paths and hopper_reason is not None:
            print(f"error: --paths hopper: {hopper_reason}", file=sys.stderr)
            return 2
    dropouts = [float(x) for x in args.dropout.split(",")]
    head_dims = [int(d) for d in args.head_dims.split(",")]
    seqlens = [int(t) for t in args.seqlens.split(",")]
    ext = ops._ext()
    summary = []
    for path in paths:
        os.environ["TK_ATTENTION_PATH"] = os.environ["TK_ATTENTION_BWD"] = path
        if path == "portable":  # the dK / dV configurations this budget selects (p = 0; dropout at D = 128 may differ)
            configs = ", ".join(f"D={D} {ext.backward_dkdv_smem_bytes(D, False)} B atomic / "
                                f"{ext.backward_dkdv_smem_bytes(D, True)} B deterministic" for D in head_dims)
            print(f"sanitize_attention: portable dK/dV configurations (TK_SMEM_LIMIT={limit or 'unset'}): {configs}",
                  flush=True)
        t0, n = time.time(), 0
        for dtype_name in args.dtypes.split(","):
            for D in head_dims:
                for T in seqlens:
                    for causal in (True, False):
                        for dropout_p in dropouts:
                            for deterministic in ((False, True) if path == "portable" else (False,)):
                                run_case(args.batch, args.heads, T, D, causal, DTYPES[dtype_name], dropout_p,
                                         deterministic, path)
                                n += 1
        print(f"sanitize_attention: path {path} ({PATHS[path]}): {n} forward+backward cases, "
              f"{time.time() - t0:.1f} s", flush=True)
        summary.append(f"{path} {n}")
    masks = 0
    rng = torch.tensor([1337, 8], dtype=torch.int64, device="cuda")
    for T in seqlens:  # the debug op's kernel (dropout_mask.cu), which the GPU tests use as the mask reference
        for dropout_p in (x for x in dropouts if x > 0):
            ops.dropout_mask(rng, args.batch, args.heads, T, dropout_p)
            masks += 1
    torch.cuda.synchronize()
    print(f"sanitize_attention: {' + '.join(summary)} forward+backward cases and {masks} dropout_mask calls ran on "
          f"{torch.cuda.get_device_name()} (TK_SMEM_LIMIT={limit or 'unset'}; dropout p in {args.dropout})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
