"""
Host time (microseconds per call) of the LayerNorm family's Python path, measured on a GPU at a tiny
shape (64 rows) where the GPU is never the bottleneck: where do the ~85 us go that separate
bench_layernorm.py's plain timing of (16384, 768) fwd+bwd (0.196 ms) from its CUDA-graph replay (0.112 ms)?

    python dev/layernorm_host.py
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tk_kernels  # noqa: E402
from tk_kernels.families.layernorm import ops  # noqa: E402

N, C = 64, 768
dev = "cuda"
x = torch.randn(N, C, device=dev, requires_grad=True)
d = torch.randn(N, C, device=dev).bfloat16().requires_grad_()
w = torch.ones(C, device=dev, requires_grad=True)
b = torch.zeros(C, device=dev, requires_grad=True)
dy = torch.randn(N, C, device=dev).bfloat16()
ds = torch.randn(N, C, device=dev)
ext = ops._ext()


def host_us(f, n=2000) -> float:
    for _ in range(100):
        f()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        f()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def clear():
    x.grad = d.grad = w.grad = b.grad = None


class Bare(torch.autograd.Function):
    """An autograd.Function with the same inputs/outputs and allocations but no kernels: the floor."""
    @staticmethod
    def forward(ctx, x, d, w, b):
        ctx.set_materialize_grads(False)
        return torch.empty(x.shape, device=dev, dtype=torch.bfloat16), torch.empty(x.shape, device=dev)

    @staticmethod
    def backward(ctx, dy, ds):
        return (torch.empty(x.shape, device=dev), torch.empty(x.shape, device=dev, dtype=torch.bfloat16),
                torch.empty(C, device=dev), torch.empty(C, device=dev))


def fwdbwd(f):
    def run():
        clear()
        s, y = f()
        torch.autograd.backward([s, y], [ds, dy])
    return run


with torch.no_grad():
    out = ext.forward(x, d, w, b, 1e-5, torch.bfloat16)
rows = {
    "ext.forward (C++ only)": lambda: ext.forward(x, d, w, b, 1e-5, torch.bfloat16),
    "ext.backward (C++ only)": lambda: ext.backward(dy, ds, out[1], out[2], out[3], w, True, torch.bfloat16),
    "tensor_reason": lambda: ops.tensor_reason(x, d, w, b, torch.bfloat16),
    "add_layer_norm fwd (public, no grad)": lambda: tk_kernels.add_layer_norm(x.detach(), d.detach(), w, b, out_dtype=torch.bfloat16),
    "add_layer_norm_op fwd (dispatch path)": lambda: ops.add_layer_norm_op(x, d, w, b, 1e-5, torch.bfloat16),
    "fwd+bwd public": fwdbwd(lambda: tk_kernels.add_layer_norm(x, d, w, b, out_dtype=torch.bfloat16)),
    "fwd+bwd dispatch path": fwdbwd(lambda: ops.add_layer_norm_op(x, d, w, b, 1e-5, torch.bfloat16)),
    "fwd+bwd bare Function (floor)": fwdbwd(lambda: Bare.apply(x, d, w, b)[::-1]),
    "fwd+bwd eager torch": fwdbwd(lambda: ((s := x + d), F.layer_norm(s, (C,), w, b).bfloat16())),
}
print(f"host us per call ({torch.cuda.get_device_name()}, torch {torch.__version__}), N={N} C={C}")
for name, f in rows.items():
    print(f"  {name:40s} {host_us(f):8.1f}")
