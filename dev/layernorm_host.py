"""
Host time (microseconds per call) of the LayerNorm family's eager paths, measured on a GPU at a tiny shape
(64 rows) where the GPU is never the bottleneck, side by side in one process:

    C++ autograd      ops.add_layer_norm_op in eager mode: one call of the extension's add_layer_norm, whose
                      autograd is in C++ (csrc/bindings.cpp, AddLayerNorm); dispatch.add_layer_norm adds the
                      per-call checks (tensor_reason) the model runs
    Python Function   the eager path before it (session 4): a torch.autograd.Function around ext.forward /
                      ext.backward with ops.py's _setup_context / _backward logic (PythonFunction below)
    custom ops        tk::add_layer_norm_fwd / _bwd with their registered autograd, called eagerly (what
                      torch.compile traces)
    bare Function     a Python autograd.Function with the same allocations and no kernels: the floor of
                      any Python-level autograd.Function
    eager torch       x + delta, F.layer_norm, .to(bf16): PyTorch's own C++ autograd

It also checks that the C++ path's outputs and gradients equal the Python Function's bitwise.

    python dev/layernorm_host.py
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import tk_kernels  # noqa: E402
from tk_kernels import dispatch  # noqa: E402
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
with dispatch.override("attention", tk=None), dispatch.override("mlp", tk=None), \
        dispatch.override("classifier", tk=None), dispatch.override("layer_norm", not_used=None):
    plan = dispatch.plan("tk", dev, torch.bfloat16, 64, n_embd=C)  # the model's plan under bf16 autocast


def host_us(f, n=2000, repeats=3) -> float:
    """The fastest of `repeats` batches of n calls, in wall microseconds per call."""
    for _ in range(100):
        f()
    best = float("inf")
    for _ in range(repeats):
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(n):
            f()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
    return best


def clear():
    x.grad = d.grad = w.grad = b.grad = None


class PythonFunction(torch.autograd.Function):
    """The eager path of session 4 (ops.py's _EagerAddLayerNorm before the C++ autograd): the same
    kernels, saved tensors and gradients, its autograd in Python."""

    @staticmethod
    def forward(ctx, x, delta, weight, bias, eps, out_dtype):
        ctx.set_materialize_grads(False)
        k = ops._kernel_ready
        out = ext.forward(k(x), None if delta is None else k(delta), k(weight), None if bias is None else k(bias),
                          eps, out_dtype)
        ops._setup_context(ctx, (x, delta, weight, bias, eps, out_dtype), out)
        return out

    @staticmethod
    def backward(ctx, dy, ds, dmean, drstd):
        s, mean, rstd, weight = ctx.saved_tensors
        ds = ds if ctx.has_delta else None
        split = ctx.has_delta and ctx.delta_dtype != s.dtype
        if dy is None:
            return ds, None if ds is None else ds.to(ctx.delta_dtype), None, None, None, None
        k = ops._kernel_ready
        dx, ddelta, dw, db, _ = ext.backward(k(dy), None if ds is None else k(ds), k(s), mean, rstd, k(weight),
                                          ctx.has_bias, ctx.delta_dtype if split else None)
        ddelta = None if not ctx.has_delta else (ddelta if split else dx)
        return dx, ddelta, dw, db if ctx.has_bias else None, None, None


def python_path(x, delta, weight, bias, eps, out_dtype):
    y, s, _, _ = PythonFunction.apply(x, delta, weight, bias, eps, out_dtype)
    return (x if delta is None else s), y


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


def same_as_python_path() -> bool:
    results = []
    for path in (ops.add_layer_norm_op, python_path):
        clear()
        s, y = path(x, d, w, b, 1e-5, torch.bfloat16)
        torch.autograd.backward([s, y], [ds, dy])
        results.append([s, y, x.grad, d.grad, w.grad, b.grad])
    clear()
    return all(torch.equal(p, q) for p, q in zip(*results))


with torch.no_grad():
    out = ext.forward(x, d, w, b, 1e-5, torch.bfloat16)
bf16 = torch.bfloat16
rows = {
    "ext.forward (C++ only, no grad)": lambda: ext.forward(x, d, w, b, 1e-5, bf16),
    "ext.backward (C++ only)": lambda: ext.backward(dy, ds, out[1], out[2], out[3], w, True, bf16),
    "tensor_reason": lambda: ops.tensor_reason(x, d, w, b, bf16),
    "fwd C++ autograd (add_layer_norm_op)": lambda: ops.add_layer_norm_op(x, d, w, b, 1e-5, bf16),
    "fwd Python Function": lambda: python_path(x, d, w, b, 1e-5, bf16),
    "fwd custom ops": lambda: ops._custom_op_path(x, d, w, b, 1e-5, bf16),
    "fwd+bwd dispatch.add_layer_norm (model, C++)": fwdbwd(lambda: dispatch.add_layer_norm(plan, x, d, w, b)),
    "fwd+bwd C++ autograd (add_layer_norm_op)": fwdbwd(lambda: ops.add_layer_norm_op(x, d, w, b, 1e-5, bf16)),
    "fwd+bwd Python Function (session 4 path)": fwdbwd(lambda: python_path(x, d, w, b, 1e-5, bf16)),
    "fwd+bwd custom ops (torch.compile's path)": fwdbwd(lambda: ops._custom_op_path(x, d, w, b, 1e-5, bf16)),
    "fwd+bwd public tk_kernels.add_layer_norm": fwdbwd(lambda: tk_kernels.add_layer_norm(x, d, w, b, out_dtype=bf16)),
    "fwd+bwd bare Python Function (floor)": fwdbwd(lambda: Bare.apply(x, d, w, b)[::-1]),
    "fwd+bwd eager torch": fwdbwd(lambda: ((s := x + d), F.layer_norm(s, (C,), w, b).to(bf16))),
}
print(f"host us per call ({torch.cuda.get_device_name()}, torch {torch.__version__}), N={N} C={C}, "
      f"x fp32, delta/y bf16; best of 3 x 2000 calls")
print(f"  C++ autograd == Python Function bitwise (s, y, 4 grads): {same_as_python_path()}")
for name, f in rows.items():
    print(f"  {name:46s} {host_us(f):8.1f}")
