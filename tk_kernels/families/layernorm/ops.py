"""
Residual add + LayerNorm on the tk_kernels CUDA kernels, as torch custom ops with autograd.

    import tk_kernels
    s, y = tk_kernels.add_layer_norm(x, delta, weight, bias)   # s = x + delta, y = LayerNorm(s)
    y = tk_kernels.layer_norm(x, weight, bias)

    s, y = tk_kernels.add_layer_norm(x, delta, weight, bias, dropout_p=0.2)  # s = x + F.dropout(delta, 0.2)
    s, y = tk_kernels.add_layer_norm(x, delta, weight, bias, delta_bias=b)   # s = x + (delta + b)

Four ops are registered (eager and torch.compile without graph breaks):
    tk::add_layer_norm_fwd(x, delta?, weight, bias?, eps, out_dtype, delta_bias?) -> (y, s, mean, rstd)
    tk::add_layer_norm_bwd(dy, ds?, s, mean, rstd, weight, has_bias, delta_dtype?, has_delta_bias)
        -> (dx, ddelta, dweight, dbias, ddelta_bias)
    tk::dropout_add_layer_norm_fwd(x, delta, weight, bias?, eps, out_dtype, dropout_p, delta_bias?)
        -> (y, s, mean, rstd, rng_state)
    tk::dropout_add_layer_norm_bwd(dy, ds?, s, mean, rstd, weight, has_bias, delta_dtype, dropout_p, rng_state,
                                   has_delta_bias) -> (dx, ddelta, dweight, dbias, ddelta_bias)
x (the residual stream) and delta (the sublayer output) are (..., C) CUDA tensors; s = x + delta is
computed in fp32 and stored in x's dtype (exactly torch's x + delta for the supported dtypes); y is
LayerNorm(s) * weight + bias in out_dtype (the autocast dtype in mixed-precision training, so the
next GEMM reads it directly); mean and rstd are fp32 (...,). Without delta s is an empty tensor and
y = LayerNorm(x). The backward writes dx once in x's dtype (the gradient of both x and delta), a
second copy in delta's dtype only where that differs (fp32 residual, bf16 delta), and dweight /
dbias from per-CTA partial sums (no second pass over the rows); it is bitwise reproducible.

delta_bias (optional, (C,), needs delta): the bias of the GEMM whose output delta is, added here instead of in
the GEMM's epilogue: delta + delta_bias is rounded to delta's dtype (what the epilogue would have stored) and
replaces delta in the sum and under the dropout. Its gradient, the column sums of ddelta as stored, comes from
the backward kernel's per-CTA partial sums beside dweight / dbias, so the GEMM's backward has no bias gradient to
reduce (model.py moves the attention's and the MLP's c_proj biases here).
In eager mode the public functions make one call of the extension's add_layer_norm, whose autograd
is in C++ (csrc/bindings.cpp, AddLayerNorm: the same kernels, saved tensors and gradients as the
custom ops' registered autograd below, with no Python in the forward or the backward); under
torch.compile they trace the custom ops.

Dropout (dropout_p in (0, 1), the second pair of ops): s = x + dropout(delta), dropout(delta) = keep ?
delta / (1 - p) : 0 rounded to delta's dtype (what F.dropout stores), exactly x + F.dropout(delta, p) for
the kernels' mask. The mask is a function of (seed, offset, element index) (Philox4x32-10 with 16-bit keep
probabilities, csrc/dropout.cuh), never stored: the backward regenerates it for ddelta = keep * ds_total /
(1 - p) (always its own tensor in delta's dtype). Seed and offset come from PyTorch's default CUDA generator
(its offset advances by 4 per call; under CUDA-graph capture each replay draws anew), and the forward
returns the pair it used as rng_state, a (2,) int64 CUDA tensor, which the backward reads. dropout_mask(
rng_state, rows, cols, dropout_p) gives that mask, for tests. dropout_p == 0 runs the ops without dropout
(add_layer_norm_op): bitwise the same results, no generator draw.

Supported: C a multiple of 8 in [64, 8192], any number of rows; dtypes (x, delta, out) all fp32, or
out bf16/fp16 with x fp32 or out's dtype and delta x's dtype or out's dtype; fp32 weight and bias
(others are cast to fp32; bias may be None); GPUs of compute capability >= 8.0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ...compile_support import register_inductor_fallbacks
from ...support import MIN_CAPABILITY, device_reason, extension

SUPPORTED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
MIN_WIDTH, MAX_WIDTH, WIDTH_MULTIPLE = 64, 8192, 8


# -----------------------------------------------------------------------------
# the custom ops

def _ext():
    """The compiled layernorm extension (built on first use, then cached on disk and per process)."""
    return extension("layernorm")


def _kernel_ready(t: Tensor) -> Tensor:
    """t itself if it is contiguous with a 16-byte aligned base (the kernels' 16-byte vectors), else a
    contiguous copy."""
    return t if t.is_contiguous() and t.data_ptr() % 16 == 0 else t.clone(memory_format=torch.contiguous_format)


def _ready_or_none(t: Tensor | None) -> Tensor | None:
    return None if t is None else _kernel_ready(t)


@torch.library.custom_op("tk::add_layer_norm_fwd", mutates_args=(), device_types="cuda")
def add_layer_norm_fwd(x: Tensor, delta: Tensor | None, weight: Tensor, bias: Tensor | None, eps: float,
                       out_dtype: torch.dtype, delta_bias: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return _ext().forward(_kernel_ready(x), _ready_or_none(delta), _kernel_ready(weight), _ready_or_none(bias), eps,
                          out_dtype, _ready_or_none(delta_bias))


@add_layer_norm_fwd.register_fake
def _add_layer_norm_fwd_fake(x, delta, weight, bias, eps, out_dtype, delta_bias=None):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    y = x.new_empty(x.shape, dtype=out_dtype)
    s = x.new_empty(x.shape) if delta is not None else x.new_empty((0,))
    mean = x.new_empty(x.shape[:-1], dtype=torch.float32)
    return y, s, mean, torch.empty_like(mean)


@torch.library.custom_op("tk::add_layer_norm_bwd", mutates_args=(), device_types="cuda")
def add_layer_norm_bwd(dy: Tensor, ds: Tensor | None, s: Tensor, mean: Tensor, rstd: Tensor, weight: Tensor,
                       has_bias: bool, delta_dtype: torch.dtype | None,
                       has_delta_bias: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    return _ext().backward(_kernel_ready(dy), _ready_or_none(ds), _kernel_ready(s), mean.contiguous(),
                           rstd.contiguous(), _kernel_ready(weight), has_bias, delta_dtype, has_delta_bias)


def _param_grads_fake(weight, has_bias, has_delta_bias):
    """(dweight, dbias, ddelta_bias) as the backward ops return them: fp32 (C,), or (0,) where not asked for (each
    its own tensor: outputs must not alias each other)."""
    return tuple(weight.new_empty(weight.shape if wanted else (0,)) for wanted in (True, has_bias, has_delta_bias))


@add_layer_norm_bwd.register_fake
def _add_layer_norm_bwd_fake(dy, ds, s, mean, rstd, weight, has_bias, delta_dtype, has_delta_bias=False):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    ddelta = s.new_empty(s.shape, dtype=delta_dtype) if delta_dtype not in (None, s.dtype) else s.new_empty((0,))
    return (torch.empty_like(s), ddelta) + _param_grads_fake(weight, has_bias, has_delta_bias)


def _column_sums(ddelta: Tensor) -> Tensor:
    """delta_bias's gradient where no kernel runs (y unused): ddelta's column sums in fp32."""
    return ddelta.reshape(-1, ddelta.shape[-1]).sum(0, dtype=torch.float32)


def _setup_context(ctx, inputs, output):
    x, delta, weight, bias, eps, out_dtype, delta_bias = inputs
    y, s, mean, rstd = output
    ctx.save_for_backward(s if delta is not None else x, mean, rstd, weight)
    ctx.has_delta, ctx.has_bias = delta is not None, bias is not None
    ctx.has_delta_bias = delta_bias is not None
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
        ddb = _column_sums(ddelta) if ctx.has_delta_bias and ddelta is not None else None
        return dx, ddelta, None, None, None, None, ddb
    dx, ddelta, dw, db, ddb = torch.ops.tk.add_layer_norm_bwd(dy, ds, s, mean, rstd, weight, ctx.has_bias,
                                                              ctx.delta_dtype if split else None, ctx.has_delta_bias)
    if not ctx.has_delta:
        ddelta = None
    elif not split:
        ddelta = dx  # the same gradient for x and delta (like torch's add)
    return (dx, ddelta, dw, db if ctx.has_bias else None, None, None, ddb if ctx.has_delta_bias else None)


add_layer_norm_fwd.register_autograd(_backward, setup_context=_setup_context)


# -----------------------------------------------------------------------------
# the same with dropout on delta: tk::dropout_add_layer_norm_fwd / tk::dropout_add_layer_norm_bwd

@torch.library.custom_op("tk::dropout_add_layer_norm_fwd", mutates_args=(), device_types="cuda")
def dropout_add_layer_norm_fwd(x: Tensor, delta: Tensor, weight: Tensor, bias: Tensor | None, eps: float,
                               out_dtype: torch.dtype, dropout_p: float,
                               delta_bias: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    return _ext().forward_dropout(_kernel_ready(x), _kernel_ready(delta), _kernel_ready(weight), _ready_or_none(bias),
                                  eps, out_dtype, dropout_p, _ready_or_none(delta_bias))


@dropout_add_layer_norm_fwd.register_fake
def _dropout_add_layer_norm_fwd_fake(x, delta, weight, bias, eps, out_dtype, dropout_p, delta_bias=None):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    y = x.new_empty(x.shape, dtype=out_dtype)
    mean = x.new_empty(x.shape[:-1], dtype=torch.float32)
    return y, x.new_empty(x.shape), mean, torch.empty_like(mean), x.new_empty((2,), dtype=torch.int64)


@torch.library.custom_op("tk::dropout_add_layer_norm_bwd", mutates_args=(), device_types="cuda")
def dropout_add_layer_norm_bwd(dy: Tensor, ds: Tensor | None, s: Tensor, mean: Tensor, rstd: Tensor, weight: Tensor,
                               has_bias: bool, delta_dtype: torch.dtype, dropout_p: float, rng_state: Tensor,
                               has_delta_bias: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    return _ext().backward_dropout(_kernel_ready(dy), _ready_or_none(ds), _kernel_ready(s), mean.contiguous(),
                                   rstd.contiguous(), _kernel_ready(weight), has_bias, delta_dtype, dropout_p,
                                   rng_state.contiguous(), has_delta_bias)


@dropout_add_layer_norm_bwd.register_fake
def _dropout_add_layer_norm_bwd_fake(dy, ds, s, mean, rstd, weight, has_bias, delta_dtype, dropout_p, rng_state,
                                     has_delta_bias=False):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    ddelta = s.new_empty(s.shape, dtype=delta_dtype)
    return (torch.empty_like(s), ddelta) + _param_grads_fake(weight, has_bias, has_delta_bias)


def _dropout_setup_context(ctx, inputs, output):
    x, delta, weight, bias, eps, out_dtype, dropout_p, delta_bias = inputs
    y, s, mean, rstd, rng_state = output
    ctx.save_for_backward(s, mean, rstd, weight, rng_state)
    ctx.has_bias, ctx.delta_dtype, ctx.dropout_p = bias is not None, delta.dtype, dropout_p
    ctx.has_delta_bias = delta_bias is not None
    ctx.mark_non_differentiable(mean, rstd, rng_state)


def _dropout_backward(ctx, dy, ds, dmean, drstd, drng):
    # as _backward; delta's gradient is always its own tensor: keep * ds_total / (1 - p) in delta's dtype.
    # csrc/bindings.cpp's DropoutAddLayerNorm::backward is the same in C++.
    s, mean, rstd, weight, rng_state = ctx.saved_tensors
    if dy is None:  # y unused: only the residual gradient flows, through the mask to delta
        if ds is None:
            return None, None, None, None, None, None, None, None
        keep = dropout_mask(rng_state, s.numel() // s.shape[-1], s.shape[-1], ctx.dropout_p).view(s.shape)
        ddelta = (ds.float() * keep.float() * keep_scale(ctx.dropout_p)).to(ctx.delta_dtype)
        return ds, ddelta, None, None, None, None, None, _column_sums(ddelta) if ctx.has_delta_bias else None
    dx, ddelta, dw, db, ddb = torch.ops.tk.dropout_add_layer_norm_bwd(
        dy, ds, s, mean, rstd, weight, ctx.has_bias, ctx.delta_dtype, ctx.dropout_p, rng_state, ctx.has_delta_bias)
    return dx, ddelta, dw, db if ctx.has_bias else None, None, None, None, ddb if ctx.has_delta_bias else None


dropout_add_layer_norm_fwd.register_autograd(_dropout_backward, setup_context=_dropout_setup_context)


def keep_scale(dropout_p: float) -> float:
    """The factor the kept elements of delta are multiplied by: float32(1 / (1 - p)), the division in float64
    (csrc/layernorm.h: dropout_keep_scale). The kernels compute round(delta * keep_scale) in delta's dtype, as
    F.dropout does, before the add."""
    p32 = torch.tensor(dropout_p, dtype=torch.float32).item()
    return torch.tensor(1.0 / (1.0 - p32), dtype=torch.float32).item()


def dropout_mask(rng_state: Tensor, rows: int, cols: int, dropout_p: float) -> Tensor:
    """The (rows, cols) uint8 keep mask (1 = kept) of the dropout that a forward with this rng_state (the fifth
    output of tk::dropout_add_layer_norm_fwd: the (2,) int64 [seed, offset] it used) and dropout_p applied to a
    (..., cols) delta of rows rows, computed on the GPU by the kernels' own keep function: dropout(delta) =
    delta * mask * keep_scale(p). torch.tensor([seed, offset], dtype=torch.int64, device="cuda") gives the mask of
    any (seed, offset); dropout_reference.keep_mask is the same in Python."""
    return _ext().dropout_mask(rng_state, int(rows), int(cols), float(dropout_p))


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


def _fits(x, delta, weight, bias, delta_bias=None) -> bool:
    """True where tensor_reason's checks before dtypes_reason all pass, tested the cheap way (one
    device, shape and dtype read per tensor, no lists); False: maybe not (tensor_reason then runs every
    check for its message). The eager model calls tensor_reason at every LayerNorm."""
    if not (isinstance(x, Tensor) and isinstance(weight, Tensor) and (delta is None or isinstance(delta, Tensor))
            and (bias is None or isinstance(bias, Tensor)) and (delta_bias is None or isinstance(delta_bias, Tensor))):
        return False
    if delta_bias is not None and (delta is None or delta_bias.device != x.device or delta_bias.shape != weight.shape
                                   or delta_bias.dtype not in SUPPORTED_DTYPES):
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


def tensor_reason(x, delta, weight, bias, out_dtype, delta_bias=None) -> str | None:
    """Checks on the arguments alone (no GPU queries): safe to trace under torch.compile."""
    if _fits(x, delta, weight, bias, delta_bias):
        return dtypes_reason(x.dtype, None if delta is None else delta.dtype, out_dtype)
    given = [(n, t) for n, t in (("x", x), ("delta", delta), ("weight", weight), ("bias", bias),
                                 ("delta_bias", delta_bias))
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
    if delta_bias is not None and delta is None:
        return "tk layer_norm: delta_bias is given without delta (it is added to delta)"
    for name, t in (("weight", weight), ("bias", bias), ("delta_bias", delta_bias)):
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
                      out_dtype: torch.dtype, dropout_p: float = 0.0,
                      delta_bias: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(x + delta, LayerNorm(x + delta) in out_dtype) without argument checks, for callers that checked
    already (tk_kernels.dispatch). delta None: (x, LayerNorm(x)). dropout_p > 0 (with a delta): x +
    dropout(delta) instead, the mask drawn from PyTorch's CUDA generator (tk::dropout_add_layer_norm_fwd);
    dropout_p == 0 is exactly the op without dropout (no generator draw). delta_bias (with a delta): delta +
    delta_bias (rounded to delta's dtype) in delta's place. Eager mode: the extension's add_layer_norm /
    dropout_add_layer_norm (autograd in C++, the same steps as _custom_op_path); torch.compile: the custom ops."""
    if torch.compiler.is_compiling():
        return _custom_op_path(x, delta, weight, bias, eps, out_dtype, dropout_p, delta_bias)
    if dropout_p > 0.0 and delta is not None:
        return _ext().dropout_add_layer_norm(x, delta, weight, bias, float(eps), out_dtype, float(dropout_p),
                                             delta_bias)
    return _ext().add_layer_norm(x, delta, weight, bias, float(eps), out_dtype, delta_bias)


def _custom_op_path(x, delta, weight, bias, eps, out_dtype, dropout_p=0.0, delta_bias=None):
    """add_layer_norm_op on the custom ops: what torch.compile traces (and, called eagerly, the GPU
    tests' reference for the C++ path)."""
    if dropout_p > 0.0 and delta is not None:
        y, s, _, _, _ = torch.ops.tk.dropout_add_layer_norm_fwd(x, delta, _f32(weight), _f32(bias), float(eps),
                                                                out_dtype, float(dropout_p), _f32(delta_bias))
        return s, y
    y, s, _, _ = torch.ops.tk.add_layer_norm_fwd(x, delta, _f32(weight), _f32(bias), float(eps), out_dtype,
                                                 _f32(delta_bias))
    return (x if delta is None else s), y


def _out_dtype(x: Tensor) -> torch.dtype:
    if torch.is_autocast_enabled(x.device.type):
        return torch.get_autocast_dtype(x.device.type)
    return x.dtype


def dropout_reason(dropout_p) -> str | None:
    """Why dropout_p is not a dropout probability the kernels take (a Python float in [0, 1)), or None."""
    if not isinstance(dropout_p, (int, float)) or isinstance(dropout_p, bool):
        return f"tk layer_norm: dropout_p must be a Python float, got {type(dropout_p).__name__}"
    if not 0.0 <= dropout_p < 1.0:
        return f"tk layer_norm supports dropout_p in [0, 1), got dropout_p={dropout_p}"
    return None


def _checked(x, delta, weight, bias, eps, out_dtype, dropout_p=0.0, delta_bias=None):
    out_dtype = _out_dtype(x) if out_dtype is None else out_dtype
    reason = tensor_reason(x, delta, weight, bias, out_dtype, delta_bias) or dropout_reason(dropout_p)
    if reason is None and not torch.compiler.is_compiling():
        reason = environment_reason(x.device)
    if reason is not None:
        raise ValueError(reason)
    return add_layer_norm_op(x, delta, weight, bias, eps, out_dtype, dropout_p, delta_bias)


def add_layer_norm(x: Tensor, delta: Tensor, weight: Tensor, bias: Tensor | None = None, eps: float = 1e-5,
                   out_dtype: torch.dtype | None = None, dropout_p: float = 0.0,
                   delta_bias: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(s, y) with s = x + delta (in x's dtype, as torch computes it) and y = F.layer_norm(s, (C,), weight,
    bias, eps) in out_dtype (default: the autocast dtype when autocast is on, else x's dtype). dropout_p > 0:
    s = x + F.dropout(delta, dropout_p) (the mask from PyTorch's CUDA generator, so torch.manual_seed
    reproduces it; dropout_mask gives it); pass 0.0 in eval. delta_bias ((C,)): delta + delta_bias, rounded to
    delta's dtype, in delta's place (a GEMM's bias, added here: see the module's docstring). Raises ValueError
    (naming what is supported) for inputs the kernels cannot handle."""
    if delta is None:
        raise ValueError("tk add_layer_norm: delta is None (use tk_kernels.layer_norm)")
    return _checked(x, delta, weight, bias, eps, out_dtype, dropout_p, delta_bias)


def layer_norm(x: Tensor, weight: Tensor, bias: Tensor | None = None, eps: float = 1e-5,
               out_dtype: torch.dtype | None = None) -> Tensor:
    """F.layer_norm(x, (C,), weight, bias, eps) in out_dtype (default: the autocast dtype when autocast
    is on, else x's dtype). Raises ValueError for inputs the kernels cannot handle."""
    return _checked(x, None, weight, bias, eps, out_dtype)[1]
