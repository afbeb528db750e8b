"""Why our attention forward is slower inside GPT-2 medium's train step than alone (session 44).

s43b's profile of `bench_train.py --models gpt2-medium --kernels torch,tk --compile graphs` (H100): our forward
133 us a call (3.192 ms / 24) against cuDNN's 112 (2.687 / 24), while alone (bench_attention, do_bench with L2
flushes) both take ~111 us at (16,16,1024,64) causal; at 12 heads (GPT-2 124M) both are ~91.5 us in the step.
This times the forward at 12 and 16 heads, ours (tk::attention_qkv_fwd on the fused projection) and cuDNN's
(SDPA on the model's q, k, v views), in CUDA graphs replayed back to back under torch.profiler, per kernel:
  alone       the attention forward only, on a qkv tensor made once
  after_gemm  c_attn's GEMM (ours / cuBLAS) writing qkv, then the attention forward on it
  layer       the forward's kernels of one block as the step runs them (c_attn GEMM, attention, c_proj GEMM,
              the MLP's two GEMMs), so the attention follows whatever the previous layer left in L2
and the attention kernel's mean / min / max us in each, with the GPU's SM clock read around the runs.

    python dev/attention_in_step.py [--heads 12 16] [--reps 30]
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tk_kernels  # noqa: E402,F401
from tk_kernels.families.attention import ops as attention_ops  # noqa: E402
from bench.bench_layernorm import graphed  # noqa: E402


def kernel_stats(fn, reps: int, match: str) -> tuple[float, float, float, int]:
    """(mean, min, max us, count) of the kernels whose name contains `match` over `reps` replays of fn."""
    fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    from torch.autograd import DeviceType
    durs = [e.device_time_total for e in prof.events()
            if e.device_type == DeviceType.CUDA and match in e.name and e.device_time_total > 0]
    if not durs:
        return float("nan"), float("nan"), float("nan"), 0
    return sum(durs) / len(durs), min(durs), max(durs), len(durs)


B, T, D = 16, 1024, 64  # GPT-2's and medium's attention: batch 16, block 1024, head dim 64
N = B * T


def block_cases(H: int) -> dict[str, tuple[str, dict]]:
    """At H heads (C = 64 H): impl -> (a substring of its attention forward's kernel name, {case: fn}), impl "ours"
    (tk::attention_qkv_fwd on the fused projection, our GEMM) or "cuDNN" (SDPA's cuDNN backend on the model's q, k, v
    views, cuBLAS), cases "alone" (the forward on a qkv made once), "after_gemm" (c_attn's GEMM, then the forward)
    and "layer" (c_attn's GEMM, the forward, c_proj and the MLP's two GEMMs), each fn one call of them."""
    C = H * D
    scale = D ** -0.5
    x = torch.randn(N, C, device="cuda", dtype=torch.bfloat16)
    w_attn = (torch.randn(3 * C, C, device="cuda") * C ** -0.5).to(torch.bfloat16)
    b_attn = torch.zeros(3 * C, device="cuda")
    w_proj = (torch.randn(C, C, device="cuda") * C ** -0.5).to(torch.bfloat16)
    w_fc = (torch.randn(4 * C, C, device="cuda") * C ** -0.5).to(torch.bfloat16)
    w_fc2 = (torch.randn(C, 4 * C, device="cuda") * (4 * C) ** -0.5).to(torch.bfloat16)
    qkv0 = F.linear(x, w_attn).view(B, T, 3 * C)

    def ours_attn(qkv):
        return torch.ops.tk.attention_qkv_fwd(qkv, H, True, scale, 0.0)[0]

    def cudnn_attn(qkv):
        q, k, v = attention_ops.qkv_views(qkv, H)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale)

    def ours_gemm(a, w, b=None):
        return torch.ops.tk.linear_fwd(a, w, b)[0]

    def torch_gemm(a, w, b=None):
        return F.linear(a, w, None if b is None else b.to(a.dtype))

    cases = {}
    for name, attn, gemm, match in (("ours", ours_attn, ours_gemm, "attention_fwd_hopper"),
                                    ("cuDNN", cudnn_attn, torch_gemm, "fprop")):
        def alone(attn=attn):
            return attn(qkv0)

        def after_gemm(attn=attn, gemm=gemm):
            return attn(gemm(x, w_attn, b_attn).view(B, T, 3 * C))

        def layer(attn=attn, gemm=gemm):
            y = attn(gemm(x, w_attn, b_attn).view(B, T, 3 * C)).transpose(1, 2).reshape(N, C)  # (B, H, T, D) views
            return gemm(gemm(gemm(y, w_proj), w_fc), w_fc2)

        cases[name] = (match, dict(alone=alone, after_gemm=after_gemm, layer=layer))
    return cases


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, nargs="+", default=[12, 16])
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), torch.__version__, "cuDNN", torch.backends.cudnn.version())
    for H in args.heads:
        for name, (match, fns) in block_cases(H).items():
            for what, fn in fns.items():
                mean, lo, hi, n = kernel_stats(graphed(fn), args.reps, match)
                print(f"H={H:2d} {name:5s} {what:10s}: attention forward {mean:7.1f} us mean "
                      f"(min {lo:.1f}, max {hi:.1f}, {n} calls)")
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
