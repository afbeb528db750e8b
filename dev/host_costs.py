"""
Host microseconds per call of the tk ops on a GPU, at tiny shapes where the GPU is never the bottleneck,
beside the PyTorch calls they replace: where does the host time of the kernels=tk train step go (its
default torch.compile step measured host-bound on the H200: 46 ms wall for 32 ms of GPU time)? Per op:
the extension's C++ call alone, the custom op called as a compiled graph calls it, and the eager path.

    python dev/host_costs.py
"""
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tk_kernels  # noqa: E402,F401
from tk_kernels.families.attention import ops as attn  # noqa: E402
from tk_kernels.families.classifier import ops as cls  # noqa: E402

dev = "cuda"


def host_us(f, n=1000) -> float:
    """Best of 5 batches of n calls (wall time per call, the GPU queue never full at these shapes)."""
    for _ in range(50):
        f()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            f()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    return best


@torch.library.custom_op("tkhost::empty2", mutates_args=(), device_types="cuda")
def empty2(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float,
           dropout_p: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return torch.empty_like(q), q.new_empty(q.shape[:3], dtype=torch.float32), q.new_empty((0,), dtype=torch.int64)


rows = []


def row(name, f, n=1000):
    us = host_us(f, n)
    rows.append((name, us))
    print(f"  {name:58s} {us:8.1f}", flush=True)


print(f"host us per call ({torch.cuda.get_device_name()}, torch {torch.__version__})")
B, H, T, D = 1, 2, 128, 64
qkv = torch.randn(B, T, 3, H, D, device=dev, dtype=torch.bfloat16)
q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
dout = torch.randn(B, H, T, D, device=dev, dtype=torch.bfloat16)
ext = attn._ext()
sc = D ** -0.5
o, lse, rng = torch.ops.tk.attention_fwd(q, k, v, True, sc, 0.0)
print(f"attention (B,H,T,D)=({B},{H},{T},{D}) causal, bf16 qkv views; forward path {attn.forward_path(q, 0.0, k, v)}, "
      f"backward path {attn.backward_path(q, 0.0, False, k, v)}")
row("floor: a custom op that allocates the 3 outputs", lambda: torch.ops.tkhost.empty2(q, k, v, True, sc, 0.0))
row("ext.attention_forward_hopper (C++ only)", lambda: ext.attention_forward_hopper(q, k, v, True, sc, 0.0))
row("ext.attention_forward (portable, C++ only)", lambda: ext.attention_forward(q, k, v, True, sc, 0.0))
row("attn._forward_impl (Python + C++)", lambda: attn._forward_impl(q, k, v, True, sc, 0.0))
row("torch.ops.tk.attention_fwd (as a compiled graph calls it)", lambda: torch.ops.tk.attention_fwd(q, k, v, True, sc, 0.0))
row("ext.attention_backward_hopper (C++ only)", lambda: ext.attention_backward_hopper(q, k, v, o, lse, dout, True, sc, 0.0, rng))
row("ext.attention_backward (portable, C++ only)",
    lambda: ext.attention_backward(q, k, v, o, lse, dout, True, sc, False, 0.0, rng))
row("torch.ops.tk.attention_bwd (as a compiled graph calls it)",
    lambda: torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, True, sc, False, 0.0, rng))
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    row("aten cudnn attention fwd (F.sdpa, no grad)", lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
qg, kg, vg = (t.detach().clone().requires_grad_() for t in (q, k, v))


def eager_tk():
    o = tk_kernels.attention(qg, kg, vg, causal=True)
    torch.autograd.grad(o, (qg, kg, vg), dout)


def eager_cudnn():
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        o = F.scaled_dot_product_attention(qg, kg, vg, is_causal=True)
    torch.autograd.grad(o, (qg, kg, vg), dout)


row("tk_kernels.attention fwd+bwd (eager autograd)", eager_tk, 500)
row("F.sdpa cuDNN fwd+bwd (eager autograd)", eager_cudnn, 500)

N, C, V = 64, 768, 50304
x = torch.randn(N, C, device=dev, dtype=torch.bfloat16)
w = torch.randn(V, C, device=dev, dtype=torch.bfloat16) * 0.02
tg = torch.randint(V, (N,), device=dev)
print(f"classifier N={N} C={C} V={V} bf16 (one chunk)")
row("torch.ops.tk.linear_cross_entropy_fwd", lambda: torch.ops.tk.linear_cross_entropy_fwd(x, w, tg, -1), 300)
row("F.linear + F.cross_entropy (no grad)", lambda: F.cross_entropy(F.linear(x, w).float(), tg, ignore_index=-1), 300)
N = 16384
x = torch.randn(N, C, device=dev, dtype=torch.bfloat16)
tg = torch.randint(V, (N,), device=dev)
print(f"classifier N={N} (GPT-2 124M's B=16, T=1024): {cls.chunk_rows(N, V)} rows per chunk; GPU-bound, wall per call")
row("torch.ops.tk.linear_cross_entropy_fwd", lambda: torch.ops.tk.linear_cross_entropy_fwd(x, w, tg, -1), 20)
