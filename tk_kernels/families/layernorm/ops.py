"""
Residual add + LayerNorm on the tk_kernels CUDA kernels, as torch custom ops with autograd.

    import tk_kernels
    s, y = tk_kernels.add_layer_norm(x, delta, weight, bias)   # s = x + delta, y = LayerNorm(s)
    y = tk_kernels.layer_norm(x, weight, bias)

Two ops are registered (eager and torch.compile without graph breaks):
    tk::add_layer_norm_fwd(x, delta?, weight, bias?, eps, out_dtype) -> (y, s, mean, rstd)
    tk::add_layer_norm_bwd(dy, ds?, s, mean, rstd, weight, has_bias, delta_dtype?) -> (dx, ddelta, dweight, dbias)
x (the residual stream) and delta (the sublayer output) are (..., C) CUDA tensors; s = x + delta is
computed in fp32 and stored in x's dtype (exactly torch's x + delta for the supported dtypes); y is
LayerNorm(s) * weight + bias in out_dtype (the autocast dtype in mixed-precision training, so the
next GEMM reads it directly); mean and rstd are fp32 (...,). Without delta s is an empty tensor and
y = LayerNorm(x). The backward writes dx once in x's dtype (the gradient of both x and delta), a
second copy in delta's dtype only where that differs (fp32 residual, bf16 delta), and dweight /
dbias from per-CTA partial sums (no second pass over the rows); it is bitwise reproducible.
In eager mode the public functions make one call of the extension's add_layer_norm, whose autograd
is in C++ (csrc/bindings.cpp, AddLayerNorm: the same kernels, saved tensors and gradients as the
custom ops' registered autograd below, with no Python in the forward or the backward); under
torch.compile they trace the custom ops.

Supported: C a multiple of 8 in [64, 8192], any number of rows; dtypes (x, delta, out) all fp32, or
out bf16/fp16 with x fp32 or out's dtype and delta x's dtype or out's dtype; fp32 weight and bias
(others are cast to fp32; bias may be None); GPUs of compute capability >= 8.0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ...compile_support import register_inductor_fallbacks
from ...support import device_reason, extension

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
MIN_WIDTH, MAX_WIDTH, WIDTH_MULTIPLE = 64, 8192, 8
MIN_CAPABILITY = (8, 0)


# -----------------------------------------------------------------------------
# the custom ops

def _ext():
    """The compiled layernorm extension (built on first use, then cached on disk and per process)."""
    return extension("layernorm")


def _kernel_ready(t: Tensor) -> Tensor:
    """t itself if it is contiguous with a 16-byte aligned base (the kernels' 16-byte vectors), else a
    contiguous copy."""
    return t if t.is_contiguous() and t.data_ptr() % 16 == 0 else t.clone(memory_format=torch.contiguous_format)


@torch.library.custom_op("tk::add_layer_norm_fwd", mutates_args=(), device_types="cuda")
def add_layer_norm_fwd(x: Tensor, delta: Tensor | None, weight: Tensor, bias: Tensor | None, eps: float,
                       out_dtype: torch.dtype) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    delta = None if delta is None else _kernel_ready(delta)
    bias = None if bias is None else _kernel_ready(bias)
    return _ext().forward(_kernel_ready(x), delta, _kernel_ready(weight), bias, eps, out_dtype)


@add_layer_norm_fwd.register_fake
def _add_layer_norm_fwd_fake(x, delta, weight, bias, eps, out_dtype):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    y = x.new_empty(x.shape, dtype=out_dtype)
    s = x.new_empty(x.shape) if delta is not None else x.new_empty((0,))
    mean = x.new_empty(x.shape[:-1], dtype=torch.float32)
    return y, s, mean, torch.empty_like(mean)


@torch.library.custom_op("tk::add_layer_norm_bwd", mutates_args=(), device_types="cuda")
def add_layer_norm_bwd(dy: Tensor, ds: Tensor | None, s: Tensor, mean: Tensor, rstd: Tensor, weight: Tensor,
                       has_bias: bool, delta_dtype: torch.dtype | None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    ds = None if ds is None else _kernel_ready(ds)
    return _ext().backward(_kernel_ready(dy), ds, _kernel_ready(s), mean.contiguous(), rstd.contiguous(),
                           _kernel_ready(weight), has_bias, delta_dtype)


@add_layer_norm_bwd.register_fake
def _add_layer_norm_bwd_fake(dy, ds, s, mean, rstd, weight, has_bias, delta_dtype):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    ddelta = s.new_empty(s.shape, dtype=delta_dtype) if delta_dtype not in (None, s.dtype) else s.new_empty((0,))
    db = weight.new_empty(weight.shape) if has_bias else weight.new_empty((0,))
    return torch.empty_like(s), ddelta, torch.empty_like(weight), db


def _setup_context(ctx, inputs, output):
    x, delta, weight, bias, eps, out_dtype = inputs
    y, s, mean, rstd = output
    ctx.save_for_backward(s if delta is not None else x, mean, rstd, weight)
    ctx.has_delta, ctx.has_bias = delta is not None, bias is not None
    ctx.delta_dtype = delta.dtype if delta is not None else None
    ctx.mark_non_differentiable(mean, rstd)
    if delta is None:
        ctx.mark_non_differentiable(s)


def _backward(ctx, dy, ds, dmean, drstd):
    # dmean, drstd are ignored (non-differentiable); dy / ds may be None or zeros where y / s is unused;
    # without delta ds is ignored. csrc/bindings.cpp's AddLayerNorm::backward is the same in C++.
    s, mean, rstd, weight = ctx.saved_tensors
    if not ctx.has_delta:
        ds = None
    split = ctx.has_delta and ctx.delta_dtype != s.dtype
    if dy is None:  # y unused: only the residual gradient flows
        dx = ds
        ddelta = None if ds is None or not ctx.has_delta else ds.to(ctx.delta_dtype)
        return dx, ddelta, None, None, None, None
    dx, ddelta, dw, db = torch.ops.tk.add_layer_norm_bwd(dy, ds, s, mean, rstd, weight, ctx.has_bias,
                                                         ctx.delta_dtype if split else None)
    if not ctx.has_delta:
        ddelta = None
    elif not split:
        ddelta = dx  # the same gradient for x and delta (like torch's add)
    return dx, ddelta, dw, db if ctx.has_bias else None, None, None


add_layer_norm_fwd.register_autograd(_backward, setup_context=_setup_context)


# -----------------------------------------------------------------------------
# support checks

def dtypes_reason(x_dtype: torch.dtype, delta_dtype: torch.dtype | None, out_dtype: torch.dtype) -> str | None:
    """Why the kernels have no variant for these dtypes (x, delta or None, output), or None."""
    d = x_dtype if delta_dtype is None else delta_dtype
    for name, t in (("x", x_dtype), ("delta", d), ("the output", out_dtype)):
        if t not in SUPPORTED_DTYPES:
            return f"tk layer_norm supports float32, bfloat16 and float16, got {name} in {t}"
    if out_dtype == torch.float32:
        ok = x_dtype == d == torch.float32
    else:
        ok = x_dtype in (torch.float32, out_dtype) and d in (x_dtype, out_dtype)
    if ok:
        return None
    return (f"tk layer_norm has no kernel for x {x_dtype}, delta {d}, output {out_dtype} (supported: all "
            "float32, or a bfloat16/float16 output with x float32 or the output's dtype and delta in x's "
            "or the output's dtype)")


def width_reason(width: int) -> str | None:
    if width % WIDTH_MULTIPLE != 0 or not MIN_WIDTH <= width <= MAX_WIDTH:
        return (f"tk layer_norm needs the width (last dim, n_embd) to be a multiple of {WIDTH_MULTIPLE} "
                f"in [{MIN_WIDTH}, {MAX_WIDTH}] (16-byte vectors of 8 elements), got {width}")
    return None


def _fits(x, delta, weight, bias) -> bool:
    """True where tensor_reason's checks before dtypes_reason all pass, tested the cheap way (one
    device, shape and dtype read per tensor, no lists); False: maybe not (tensor_reason then runs every
    check for its message). The eager model calls tensor_reason at every LayerNorm."""
    if not (isinstance(x, Tensor) and isinstance(weight, Tensor) and (delta is None or isinstance(delta, Tensor))
            and (bias is None or isinstance(bias, Tensor))):
        return False
    device = x.device
    if device.type != "cuda" or weight.device != device:
        return False
    shape = x.shape
    if not shape:
        return False
    width = shape[-1]
    return (width % WIDTH_MULTIPLE == 0 and MIN_WIDTH <= width <= MAX_WIDTH
            and (delta is None or (delta.device == device and delta.shape == shape))
            and weight.shape == (width,) and weight.dtype in SUPPORTED_DTYPES
            and (bias is None or (bias.device == device and bias.shape == (width,)
                                  and bias.dtype in SUPPORTED_DTYPES)))


def tensor_reason(x, delta, weight, bias, out_dtype) -> str | None:
    """Checks on the arguments alone (no GPU queries): safe to trace under torch.compile."""
    if _fits(x, delta, weight, bias):
        return dtypes_reason(x.dtype, None if delta is None else delta.dtype, out_dtype)
    given = [(n, t) for n, t in (("x", x), ("delta", delta), ("weight", weight), ("bias", bias))
             if t is not None or n in ("x", "weight")]
    for name, t in given:
        if not isinstance(t, Tensor):
            return f"tk layer_norm: {name} must be a torch.Tensor, got {type(t).__name__}"
    for name, t in given:
        if t.device.type != "cuda" or t.device != x.device:
            return f"tk layer_norm runs on one CUDA device; {name} is on {t.device} (x on {x.device})"
    if x.dim() < 1:
        return "tk layer_norm: x must have at least 1 dimension"
    reason = width_reason(x.shape[-1])
    if reason is not None:
        return reason
    if delta is not None and delta.shape != x.shape:
        return f"tk layer_norm: delta has shape {tuple(delta.shape)}, x has {tuple(x.shape)}; they must match"
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and tuple(t.shape) != (x.shape[-1],):
            return f"tk layer_norm: {name} must have shape ({x.shape[-1]},), got {tuple(t.shape)}"
        if t is not None and t.dtype not in SUPPORTED_DTYPES:
            return f"tk layer_norm: {name} must be float32 (or bfloat16/float16), got {t.dtype}"
    return dtypes_reason(x.dtype, None if delta is None else delta.dtype, out_dtype)


def gpu_reason(major: int, minor: int, name: str) -> str | None:
    """Why the kernels cannot run on GPU `name` of compute capability major.minor, or None. No GPU query."""
    if (major, minor) < MIN_CAPABILITY:
        return f"tk layer_norm needs a GPU of compute capability >= 8.0, got {name} with {major}.{minor}"
    return None


def build_reason(major: int, minor: int) -> str | None:
    """Why the extension cannot run on this compute capability (it does not build / load, other archs)."""
    from tk_kernels.build import load_reason  # not at import (python -m tk_kernels.build)
    return load_reason("layernorm", major, minor, label="tk layer_norm")


_env_reasons: dict[int, str | None] = {}  # device index -> environment_reason


def environment_reason(device: torch.device) -> str | None:
    """Why the kernels cannot run on this CUDA device (GPU generation, build), or None; once per device."""
    return device_reason(_env_reasons, device, gpu_reason, build_reason)


def unsupported_reason(device: torch.device, dtype: torch.dtype, dims: dict) -> str | None:
    """Why tk layer_norm cannot run for a model computing in `dtype` on `device` with
    dims["n_embd"] wide rows, or None: the check tk_kernels/dispatch.py makes once per plan.
    May build the extension."""
    if device.type != "cuda":
        return f"no CUDA GPU (tensors are on {device.type}); the TK kernels need an NVIDIA GPU"
    if not torch.cuda.is_available():
        return "no usable CUDA GPU (torch.cuda.is_available() is False)"
    if dtype not in SUPPORTED_DTYPES:
        return f"tk layer_norm supports float32, bfloat16 and float16, got {dtype}"
    if dims.get("n_embd") is not None:
        reason = width_reason(int(dims["n_embd"]))
        if reason is not None:
            return reason
    return environment_reason(device)


# -----------------------------------------------------------------------------
# public API

def _f32(t: Tensor | None) -> Tensor | None:
    return t if t is None or t.dtype == torch.float32 else t.float()


def add_layer_norm_op(x: Tensor, delta: Tensor | None, weight: Tensor, bias: Tensor | None, eps: float,
                      out_dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """(x + delta, LayerNorm(x + delta) in out_dtype) without argument checks, for callers that checked
    already (tk_kernels.dispatch). delta None: (x, LayerNorm(x)). Eager mode: the extension's
    add_layer_norm (autograd in C++, the same steps as _custom_op_path); torch.compile: the custom ops."""
    if torch.compiler.is_compiling():
        return _custom_op_path(x, delta, weight, bias, eps, out_dtype)
    return _ext().add_layer_norm(x, delta, weight, bias, float(eps), out_dtype)


def _custom_op_path(x, delta, weight, bias, eps, out_dtype):
    """add_layer_norm_op on the custom ops: what torch.compile traces (and, called eagerly, the GPU
    tests' reference for the C++ path)."""
    y, s, _, _ = torch.ops.tk.add_layer_norm_fwd(x, delta, _f32(weight), _f32(bias), float(eps), out_dtype)
    return (x if delta is None else s), y


def _out_dtype(x: Tensor) -> torch.dtype:
    if torch.is_autocast_enabled(x.device.type):
        return torch.get_autocast_dtype(x.device.type)
    return x.dtype


def _checked(x, delta, weight, bias, eps, out_dtype):
    out_dtype = _out_dtype(x) if out_dtype is None else out_dtype
    reason = tensor_reason(x, delta, weight, bias, out_dtype)
    if reason is None and not torch.compiler.is_compiling():
        reason = environment_reason(x.device)
    if reason is not None:
        raise ValueError(reason)
    return add_layer_norm_op(x, delta, weight, bias, eps, out_dtype)


def add_layer_norm(x: Tensor, delta: Tensor, weight: Tensor, bias: Tensor | None = None, eps: float = 1e-5,
                   out_dtype: torch.dtype | None = None) -> tuple[Tensor, Tensor]:
    """(s, y) with s = x + delta (in x's dtype, as torch computes it) and y = F.layer_norm(s, (C,), weight,
    bias, eps) in out_dtype (default: the autocast dtype when autocast is on, else x's dtype).
    Raises ValueError (naming what is supported) for inputs the kernels cannot handle."""
    if delta is None:
        raise ValueError("tk add_layer_norm: delta is None (use tk_kernels.layer_norm)")
    return _checked(x, delta, weight, bias, eps, out_dtype)


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor | None = None, eps: float = 1e-5,
               out_dtype: torch.dtype | None = None) -> Tensor:
    """F.layer_norm(x, (C,), weight, bias, eps) in out_dtype (default: the autocast dtype when autocast
    is on, else x's dtype). Raises ValueError for inputs the kernels cannot handle."""
    return _checked(x, None, weight, bias, eps, out_dtype)[1]
