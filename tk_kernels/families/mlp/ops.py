"""
The transformer MLP, c_proj(gelu(c_fc(x))), on our Hopper GEMM with fused epilogues, as torch custom
ops with autograd.

    import tk_kernels
    y = tk_kernels.mlp(x, w_fc, b_fc, w_proj, b_proj)        # x (N, C); w_fc (4C, C); w_proj (C, 4C)
    y = tk_kernels.linear(x, w, b)                           # F.linear on the same GEMM

Forward (two GEMMs, csrc/gemm.cu):
    pre = x W_fc^T + b_fc          epilogue: + bias, round, GELU -> writes g = gelu(pre) and d = gelu'(pre)
                                   (pre itself is never written)
    y   = g W_proj^T + b_proj      epilogue: + bias
Backward (four GEMMs, two of them ours, and two column sums, csrc/colsum.cu):
    dh      = (dy W_proj) * d         d fused into the GEMM's epilogue (saved by the forward, which had
                                      computed most of it for GELU: the backward's epilogue is a multiply)
    dW_proj = dy^T g,   dW_fc = dh^T x    cuBLAS (faster at these long-K products, _weight_grad): fp32 out for
                                           fp32 weights, the 16-bit output for 16-bit ones
    dx      = dh W_fc
    db_fc   = sum_rows dh             the GELU' GEMM also writes dh's column sums per 64-row block (fp32,
                                      (N / 64, 4C)); our column-sum kernel sums those blocks
    db_proj = sum_rows dy             the same GEMM sums its A operand dy's columns per 64-row block as it
                                      reads dy ((N / 64, C), a_colsum); the column-sum kernel sums those
Every GEMM reads its operands in the layout they are stored in: the transposes are the GEMM's
MN-major operand modes, never copies.

Precision: bf16/fp16 operands, fp32 accumulation, outputs rounded to the operand dtype, like
autocast's F.linear; GELU (exact erf by default, nn.GELU(approximate='tanh') with
approximate='tanh') is computed in fp32 on the rounded pre-activation, as PyTorch computes it.
gelu'(pre) is computed there too and rounded to the operand dtype when saved, so dh is rounded once
more than PyTorch's backward rounds it (a relative error of the dtype's half-ulp per element).
Weights and biases may be fp32 (autocast training keeps fp32 parameters): the ops cast the weights
to the activations' dtype themselves (the MLP's forward saves its casts for the backward, as autocast's
cache does) and return their gradients in the parameters' dtype.

Registered ops (eager and torch.compile without graph breaks):
    tk::mlp_fwd(x, w_fc, b_fc, w_proj, b_proj, approximate) -> (y, d, g, w_fc16, w_proj16)
    tk::mlp_bwd(dy, x, w_fc, w_proj, d, g, has_b_fc, has_b_proj, w_dtype, b_dtype)   (d holds either GELU form's)
    tk::linear_fwd(x, w, b) -> (y, w16);  tk::linear_bwd(dy, x, w16, has_b, w_dtype, b_dtype)
Requirements: an sm_90 GPU (H100/H200) and an sm_90a build; 2-d x with rows of a multiple of 8
elements, weights whose dims are multiples of 8. Anything else is a clear ValueError (kernels=tk) or
the PyTorch reference (kernels=auto).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ...compile_support import register_inductor_fallbacks
from ...support import device_reason, extension

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
APPROXIMATIONS = ("none", "tanh")
STORE, GELU, DGELU, STORE_F32 = 0, 1, 2, 3  # the GEMM's epilogues (csrc/mlp.h)


def _ext():
    """The compiled MLP extension (built on first use, then cached on disk and per process)."""
    return extension("mlp")


def _dtype(name: str) -> torch.dtype:
    return getattr(torch, name)


def _dtype_name(t: Tensor) -> str:
    """t's dtype as the custom ops take it (a string): _dtype's inverse."""
    return str(t.dtype).removeprefix("torch.")


def _bias(b: Tensor | None, dtype: torch.dtype) -> Tensor | None:
    """b as the GEMM epilogues read it: in fp32, or as it is when it has the activations' 16-bit dtype (the kernel
    widens it exactly: no cast launch a call), contiguous and aligned to two elements (they read pairs)."""
    if b is None:
        return None
    b = b if b.dtype in (torch.float32, dtype) else b.float()
    b = b.contiguous()
    return b if b.data_ptr() % (2 * b.element_size()) == 0 else b.clone()


# torch.mm with an fp32 output from 16-bit inputs (aten::mm.dtype, PyTorch >= 2.8)
_MM_OUT_DTYPE = hasattr(torch.ops.aten.mm, "dtype")


def _weight_grad(a: Tensor, b: Tensor, shape, dtype: torch.dtype) -> Tensor:
    """a^T b for a (K, M), b (K, N): the weight gradient (M, N), accumulated in fp32, in `dtype`.
    cuBLAS (torch.mm, fp32 out) where PyTorch has it: side by side on an H200 (dev/mlp_dw_variants.py,
    bench/RESULTS.md session 14) it took 0.119 / 0.188 / 0.789 ms against 0.139 / 0.204 / 0.887 for our
    split-K GEMM (K split to fill the GPU, fp32 atomics into a zeroed output) at the MLP's shapes,
    N = 16384, C = 768 / 1024 / 2048; on an H100 (dev/dw_gemm.py, session 46) our GEMM equals cuBLAS where K
    is not split and trails it by 2-17% where it is. Ours (STORE_F32, still tested) otherwise. Parameters in the
    operands' 16-bit dtype get cuBLAS's 16-bit output (one rounding, as PyTorch's own backward) instead of an
    fp32 product and a cast pass over it."""
    if _MM_OUT_DTYPE:
        if dtype == a.dtype:
            return torch.mm(a.t(), b)
        out = torch.mm(a.t(), b, out_dtype=torch.float32)
    else:
        out = torch.zeros(shape, device=a.device, dtype=torch.float32)
        _ext().gemm_(a, True, b, True, out, STORE_F32)
    return out if dtype == torch.float32 else out.to(dtype)


def _block_sums(x: Tensor, wanted: bool) -> Tensor | None:
    """The fp32 buffer of x's column sums per block of 64 rows, ((rows + 63) / 64, cols), that a GEMM fills (colsum
    for its output, a_colsum for its A operand), or None when that bias gradient is not wanted."""
    return torch.empty(((x.shape[0] + 63) // 64, x.shape[1]), device=x.device, dtype=torch.float32) if wanted else None


_SUM_DTYPES = (torch.float32, torch.bfloat16, torch.float16)  # the column sums' output dtypes


def _column_sums(x: Tensor, dtype: torch.dtype) -> Tensor:
    """x's column sums, summed in fp32 and returned in `dtype`: written so by the kernel for fp32 / bf16 / fp16 (a
    bias's gradient without a cast launch after it), cast from fp32 for any other dtype (float64 parameters)."""
    if dtype in _SUM_DTYPES:
        return _ext().column_sums(x, dtype)
    return _ext().column_sums(x).to(dtype)


def _cast(w: Tensor, dtype: torch.dtype, copy: Tensor | None = None) -> Tensor:
    """w in `dtype` for the forward to save, or an empty tensor when w has that dtype already or the caller
    passed its 16-bit copy (a custom op's outputs may not alias its inputs): the backward then uses w or the
    copy itself."""
    return w.to(dtype).contiguous() if w.dtype != dtype and copy is None else w.new_empty((0,), dtype=dtype)


def _saved(w: Tensor, w16: Tensor, copy: Tensor | None = None) -> Tensor:
    """The weight the forward used: the caller's 16-bit copy of w, else its saved cast, else w itself when no
    cast was needed."""
    return copy.contiguous() if copy is not None else w16 if w16.numel() else w.contiguous()


def _copy_reason(op: str, w: Tensor, copy: Tensor | None, dtype: torch.dtype) -> str | None:
    """Why `copy` cannot stand in for w in op's GEMM computing in `dtype` (None: it can, or there is none)."""
    if copy is None:
        return None
    if copy.dtype != dtype or copy.shape != w.shape or copy.device != w.device:
        return (f"{op}: a weight's 16-bit copy must have the weight's shape {tuple(w.shape)} and device and the "
                f"dtype {dtype}, got {tuple(copy.shape)} {copy.dtype} on {copy.device}")
    return None


# -----------------------------------------------------------------------------
# the MLP

def _mlp_fwd_impl(x: Tensor, w_fc: Tensor, b_fc: Tensor | None, w_proj: Tensor, b_proj: Tensor | None,
                  approximate: str, copy_fc: Tensor | None = None,
                  copy_proj: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(y, d, g, wf16, wp16): the output (N, C) and, for the backward, gelu'(pre) and the GELU output
    (N, 4C), all in x's dtype, and the weights cast to x's dtype (empty where they had it already or come
    with their 16-bit copies copy_fc / copy_proj, which the GEMMs then read), so that the backward does not
    cast them again (24 casts of 8.6 us a GPT-2 124M step, H200)."""
    ext = _ext()
    x = x.contiguous()
    wf16, wp16 = _cast(w_fc, x.dtype, copy_fc), _cast(w_proj, x.dtype, copy_proj)
    wf, wp = _saved(w_fc, wf16, copy_fc), _saved(w_proj, wp16, copy_proj)
    N, H, C = x.shape[0], wf.shape[0], wp.shape[0]
    d, g = x.new_empty((N, H)), x.new_empty((N, H))
    y = x.new_empty((N, C))
    ext.gemm_(x, False, wf, False, g, GELU, _bias(b_fc, x.dtype), d, approximate == "tanh")
    ext.gemm_(g, False, wp, False, y, STORE, _bias(b_proj, x.dtype))
    return y, d, g, wf16, wp16


@torch.library.custom_op("tk::mlp_fwd", mutates_args=(), device_types="cuda")
def mlp_fwd(x: Tensor, w_fc: Tensor, b_fc: Tensor | None, w_proj: Tensor, b_proj: Tensor | None,
            approximate: str, copy_fc: Tensor | None = None,
            copy_proj: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    return _mlp_fwd_impl(x, w_fc, b_fc, w_proj, b_proj, approximate, copy_fc, copy_proj)


@mlp_fwd.register_fake
def _mlp_fwd_fake(x, w_fc, b_fc, w_proj, b_proj, approximate, copy_fc=None, copy_proj=None):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    N, H, C = x.shape[0], w_fc.shape[0], w_proj.shape[0]
    return (x.new_empty((N, C)), x.new_empty((N, H)), x.new_empty((N, H)), _cast(w_fc, x.dtype, copy_fc),
            _cast(w_proj, x.dtype, copy_proj))


def _mlp_bwd_impl(dy: Tensor, x: Tensor, w_fc: Tensor, w_proj: Tensor, d: Tensor, g: Tensor, has_b_fc: bool,
                  has_b_proj: bool, w_dtype: str, b_dtype: str) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """(dx, dw_fc, db_fc, dw_proj, db_proj); the bias gradients are empty (0,) tensors when there is
    no bias."""
    ext = _ext()
    dy, x = dy.contiguous().to(x.dtype), x.contiguous()
    wf, wp = w_fc.contiguous(), w_proj.contiguous()  # in x's dtype: the forward's casts (_mlp_setup)
    wdt, bdt = _dtype(w_dtype), _dtype(b_dtype)
    dh = torch.empty_like(d)
    # (dy W_proj) * gelu'(pre), and with biases the column sums of dh and of dy per block of 64 rows
    dh_sums, dy_sums = _block_sums(d, has_b_fc), _block_sums(dy, has_b_proj)
    ext.gemm_(dy, False, wp, True, dh, DGELU, None, d, False, 0, dh_sums, dy_sums)
    dx = torch.empty_like(x)
    ext.gemm_(dh, False, wf, True, dx, STORE)                                    # dh W_fc
    dw_proj = _weight_grad(dy, g, tuple(wp.shape), wdt)                          # dy^T g
    dw_fc = _weight_grad(dh, x, tuple(wf.shape), wdt)                            # dh^T x
    if has_b_fc and has_b_proj and bdt in _SUM_DTYPES and dh_sums.shape[0] <= 512:  # both in one launch
        db_fc, db_proj = ext.column_sums_pair(dh_sums, dy_sums, bdt)
        return dx, dw_fc, db_fc, dw_proj, db_proj
    empty = x.new_empty((0,), dtype=bdt)
    db_proj = _column_sums(dy_sums, bdt) if has_b_proj else empty    # the 64-row blocks' sums, summed
    db_fc = _column_sums(dh_sums, bdt) if has_b_fc else empty.clone()
    return dx, dw_fc, db_fc, dw_proj, db_proj


@torch.library.custom_op("tk::mlp_bwd", mutates_args=(), device_types="cuda")
def mlp_bwd(dy: Tensor, x: Tensor, w_fc: Tensor, w_proj: Tensor, d: Tensor, g: Tensor, has_b_fc: bool,
            has_b_proj: bool, w_dtype: str, b_dtype: str) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    return _mlp_bwd_impl(dy, x, w_fc, w_proj, d, g, has_b_fc, has_b_proj, w_dtype, b_dtype)


@mlp_bwd.register_fake
def _mlp_bwd_fake(dy, x, w_fc, w_proj, d, g, has_b_fc, has_b_proj, w_dtype, b_dtype):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    wdt, bdt = _dtype(w_dtype), _dtype(b_dtype)
    H, C = w_fc.shape
    return (x.new_empty(x.shape), x.new_empty((H, C), dtype=wdt),
            x.new_empty((H if has_b_fc else 0,), dtype=bdt), x.new_empty((C, H), dtype=wdt),
            x.new_empty((C if has_b_proj else 0,), dtype=bdt))


def _save(ctx, inputs, output):
    """What the backward needs, on ctx: the tensors, whether there are biases, the parameters' dtypes."""
    x, w_fc, b_fc, w_proj, b_proj, _approximate, copy_fc, copy_proj = inputs  # the GELU form is in d already
    _, d, g, wf16, wp16 = output
    ctx.save_for_backward(x, _saved(w_fc, wf16, copy_fc), _saved(w_proj, wp16, copy_proj), d, g)
    ctx.has_b_fc, ctx.has_b_proj = b_fc is not None, b_proj is not None
    ctx.w_dtype = _dtype_name(w_fc)
    ctx.b_dtype = _dtype_name(b_fc if b_fc is not None else b_proj if b_proj is not None else w_fc)


def _gradients(ctx, dy, backward) -> tuple:
    """The gradients of (x, w_fc, b_fc, w_proj, b_proj, approximate, copy_fc, copy_proj) from dy, by backward
    (mlp_bwd's signature); the copies get none (the weights themselves get theirs)."""
    x, w_fc, w_proj, d, g = ctx.saved_tensors
    dx, dw_fc, db_fc, dw_proj, db_proj = backward(
        dy, x, w_fc, w_proj, d, g, ctx.has_b_fc, ctx.has_b_proj, ctx.w_dtype, ctx.b_dtype)
    return (dx, dw_fc, db_fc if ctx.has_b_fc else None, dw_proj, db_proj if ctx.has_b_proj else None, None,
            None, None)


def _mlp_setup(ctx, inputs, output):
    _save(ctx, inputs, output)
    _, d, g, wf16, wp16 = output
    ctx.mark_non_differentiable(d, g, wf16, wp16)
    ctx.set_materialize_grads(False)  # no zero (N, 4C) gradients for d and g: measured 0.06 ms a step


def _mlp_backward(ctx, dy, _dd, _dg, _dwf16, _dwp16):
    if dy is None:
        return None, None, None, None, None, None, None, None
    return _gradients(ctx, dy, torch.ops.tk.mlp_bwd)


mlp_fwd.register_autograd(_mlp_backward, setup_context=_mlp_setup)


class _EagerMLP(torch.autograd.Function):
    """The op in eager mode: the same forward and backward (_mlp_fwd_impl, _mlp_bwd_impl, _save) as an
    autograd.Function, without torch.library's Python autograd wrapper around the custom ops, whose host time
    made the op host-bound in eager mode (H200, C = 768: 0.97 ms of host time per fwd+bwd for 0.84 ms of GPU
    time; bench/RESULTS.md session 15). dev/host_overhead.py (CPU machine, stubbed GEMMs): dispatch.mlp fwd+bwd
    148-152 us against 233-254 with the custom ops (attention's 119-121 beside them). torch.compile keeps
    tracing the custom ops (mlp_op)."""

    @staticmethod
    def forward(ctx, x, w_fc, b_fc, w_proj, b_proj, approximate, copy_fc, copy_proj):
        output = _mlp_fwd_impl(x, w_fc, b_fc, w_proj, b_proj, approximate, copy_fc, copy_proj)
        _save(ctx, (x, w_fc, b_fc, w_proj, b_proj, approximate, copy_fc, copy_proj), output)
        return output[0]

    @staticmethod
    def backward(ctx, dy):
        return _gradients(ctx, dy, _mlp_bwd_impl)


# -----------------------------------------------------------------------------
# a single linear layer: tk_kernels.linear, and the attention's c_attn and c_proj (dispatch.linear)

def _linear_fwd_impl(x: Tensor, w: Tensor, b: Tensor | None, copy: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """(y, w16): x w^T + b in x's dtype, and w cast to x's dtype (empty where it had it already or comes with
    its 16-bit copy `copy`, which the GEMM then reads) for the backward, which then does not cast it again (as
    autocast's cache spares F.linear's backward)."""
    x = x.contiguous()
    w16 = _cast(w, x.dtype, copy)
    y = x.new_empty((x.shape[0], w.shape[0]))
    _ext().gemm_(x, False, _saved(w, w16, copy), False, y, STORE, _bias(b, x.dtype))
    return y, w16


@torch.library.custom_op("tk::linear_fwd", mutates_args=(), device_types="cuda")
def linear_fwd(x: Tensor, w: Tensor, b: Tensor | None, copy: Tensor | None = None) -> tuple[Tensor, Tensor]:
    return _linear_fwd_impl(x, w, b, copy)


@linear_fwd.register_fake
def _linear_fwd_fake(x, w, b, copy=None):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    w16 = x.new_empty(w.shape if w.dtype != x.dtype and copy is None else (0,), dtype=x.dtype)
    return x.new_empty((x.shape[0], w.shape[0])), w16


def _linear_bwd_impl(dy: Tensor, x: Tensor, w: Tensor, has_b: bool, w_dtype: str,
                     b_dtype: str) -> tuple[Tensor, Tensor, Tensor]:
    """(dx, dw, db) from dy, the forward's x and its 16-bit weight w: dx = dy w on our GEMM (w read MN-major, no
    transposing copy), dw = dy^T x on cuBLAS with an fp32 output (_weight_grad: no bf16 rounding of the gradient,
    no cast kernel after it), db = dy's column sums (the dx GEMM sums them per 64-row block as it reads dy, our
    column-sum kernel sums the blocks); dw and db in the parameters' dtypes, db empty without a bias."""
    dy, x = dy.contiguous().to(x.dtype), x.contiguous()
    dx = torch.empty_like(x)
    dy_sums = _block_sums(dy, has_b)
    _ext().gemm_(dy, False, w.contiguous(), True, dx, STORE, a_colsum=dy_sums)
    dw = _weight_grad(dy, x, tuple(w.shape), _dtype(w_dtype))
    bdt = _dtype(b_dtype)
    db = _column_sums(dy_sums, bdt) if has_b else x.new_empty((0,), dtype=bdt)
    return dx, dw, db


@torch.library.custom_op("tk::linear_bwd", mutates_args=(), device_types="cuda")
def linear_bwd(dy: Tensor, x: Tensor, w: Tensor, has_b: bool, w_dtype: str,
               b_dtype: str) -> tuple[Tensor, Tensor, Tensor]:
    return _linear_bwd_impl(dy, x, w, has_b, w_dtype, b_dtype)


@linear_bwd.register_fake
def _linear_bwd_fake(dy, x, w, has_b, w_dtype, b_dtype):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    return (x.new_empty(x.shape), x.new_empty(w.shape, dtype=_dtype(w_dtype)),
            x.new_empty((w.shape[0] if has_b else 0,), dtype=_dtype(b_dtype)))


def _linear_save(ctx, inputs, output) -> None:
    x, w, b, copy = inputs
    ctx.save_for_backward(x, _saved(w, output[1], copy))
    ctx.has_b = b is not None
    ctx.w_dtype = _dtype_name(w)
    ctx.b_dtype = _dtype_name(b if b is not None else w)


def _linear_gradients(ctx, dy, backward) -> tuple:
    x, w16 = ctx.saved_tensors
    has_b = ctx.has_b and ctx.needs_input_grad[2]  # a detached bias (dispatch.linear(bias_grad=False)): no sums
    dx, dw, db = backward(dy, x, w16, has_b, ctx.w_dtype, ctx.b_dtype)
    return dx, dw, db if has_b else None, None


def _linear_setup(ctx, inputs, output):
    _linear_save(ctx, inputs, output)
    ctx.mark_non_differentiable(output[1])
    ctx.set_materialize_grads(False)


def _linear_backward(ctx, dy, _dw16):
    if dy is None:
        return None, None, None, None
    return _linear_gradients(ctx, dy, torch.ops.tk.linear_bwd)


linear_fwd.register_autograd(_linear_backward, setup_context=_linear_setup)


class _EagerLinear(torch.autograd.Function):
    """linear_op in eager mode: the same forward and backward as the custom ops, as an autograd.Function
    (without torch.library's Python autograd wrapper, whose host time _EagerMLP measured); torch.compile traces
    the custom ops."""

    @staticmethod
    def forward(ctx, x, w, b, copy):
        output = _linear_fwd_impl(x, w, b, copy)
        _linear_save(ctx, (x, w, b, copy), output)
        return output[0]

    @staticmethod
    def backward(ctx, dy):
        return _linear_gradients(ctx, dy, _linear_bwd_impl)


# -----------------------------------------------------------------------------
# support checks

def unsupported_reason(device: torch.device, dtype: torch.dtype, dims: dict) -> str | None:
    """Why the tk MLP cannot run for a model of these dims ({"n_embd", ...}) on inputs of this device
    and dtype, or None if it can: the check tk_kernels/dispatch.py makes once per plan. May build the
    extension."""
    if device.type != "cuda":
        return f"no CUDA GPU (tensors are on {device.type}); the TK kernels need an NVIDIA GPU"
    if dtype not in SUPPORTED_DTYPES:
        return f"tk mlp supports dtypes bfloat16 and float16, got {dtype}"
    n_embd = dims.get("n_embd")
    if n_embd is not None and n_embd % 8:
        return f"tk mlp needs n_embd to be a multiple of 8, got {n_embd}"
    if not torch.cuda.is_available():
        return "no usable CUDA GPU (torch.cuda.is_available() is False)"
    return environment_reason(device)


def not_used_on(device: torch.device) -> str | None:
    """Why the model keeps its MLP on PyTorch on this GPU (the GEMM is Hopper-only), or None: on a GPU of
    another generation kernels=tk runs the other families' kernels and PyTorch's MLP, without an error."""
    if device.type != "cuda" or not torch.cuda.is_available():
        return None  # unsupported_reason states it
    major, minor = torch.cuda.get_device_capability(device)
    if gpu_reason(major, minor, "this GPU") is None:
        return None
    return (f"its GEMM runs on Hopper GPUs (compute capability 9.0) only; this GPU has {major}.{minor}, where "
            "the MLP is PyTorch's")


def gpu_reason(major: int, minor: int, name: str) -> str | None:
    """Why the kernel cannot run on GPU `name` of compute capability major.minor, or None. No GPU query."""
    if major != 9:
        return f"tk mlp runs on Hopper GPUs (compute capability 9.0: H100, H200) only, got {name} with {major}.{minor}"
    return None


def build_reason(major: int, minor: int) -> str | None:
    """Why the extension cannot run on this compute capability (build, load, no sm_90a code), or None."""
    from tk_kernels.build import arch_reason, load_reason  # not at import (python -m tk_kernels.build)
    return load_reason("mlp", major, minor) or arch_reason(_ext(), "mlp", "sm_90a", "the tk mlp GEMM")


_env_reasons: dict[int, str | None] = {}  # device index -> environment_reason

def environment_reason(device: torch.device) -> str | None:
    """Why the kernel cannot run on this CUDA device (GPU generation, build), or None; once per device."""
    return device_reason(_env_reasons, device, gpu_reason, build_reason)


def tensor_reason(x, *weights) -> str | None:
    """Checks on the arguments alone (no GPU queries): safe to trace under torch.compile. weights:
    the (out, in) weight matrices in order, then None or a bias per weight is not checked here."""
    if not isinstance(x, Tensor):
        return f"tk mlp: x must be a torch.Tensor, got {type(x).__name__}"
    if x.dtype not in SUPPORTED_DTYPES:
        return f"tk mlp supports bfloat16 and float16 activations, got {x.dtype}"
    if x.dim() != 2:
        return f"tk mlp needs a 2-d x (N, C), got shape {tuple(x.shape)}"
    width = x.shape[1]
    for w in weights:
        if w.device != x.device or w.dim() != 2 or w.shape[1] != width:
            return (f"tk mlp: weight of shape {tuple(w.shape)} on {w.device} does not fit an input of "
                    f"width {width} on {x.device}")
        if w.shape[0] % 8 or w.shape[1] % 8 or min(w.shape) == 0:
            return f"tk mlp needs weight dims that are positive multiples of 8, got {tuple(w.shape)}"
        width = w.shape[0]
    return None


# -----------------------------------------------------------------------------
# public API

def _public_reason(x, *weights) -> str | None:
    if isinstance(x, Tensor) and x.device.type != "cuda":
        return f"tk mlp runs on CUDA tensors only; x is on {x.device}"
    reason = tensor_reason(x, *weights)
    if reason is None and not torch.compiler.is_compiling():
        reason = environment_reason(x.device)
    return reason


def mlp_op(x: Tensor, w_fc: Tensor, b_fc: Tensor | None, w_proj: Tensor, b_proj: Tensor | None,
           approximate: str = "none", copy_fc: Tensor | None = None, copy_proj: Tensor | None = None) -> Tensor:
    """The op without argument checks, for callers that checked already (tk_kernels.dispatch): the custom op
    under torch.compile, its autograd.Function twin in eager mode (_EagerMLP). copy_fc / copy_proj: 16-bit
    copies of the weights in x's dtype (the model's, GPT.keep_weight16) that the GEMMs read instead of casting
    the weights; the gradients still go to w_fc / w_proj, in their dtype."""
    if torch.compiler.is_compiling():
        return torch.ops.tk.mlp_fwd(x, w_fc, b_fc, w_proj, b_proj, approximate, copy_fc, copy_proj)[0]
    return _EagerMLP.apply(x, w_fc, b_fc, w_proj, b_proj, approximate, copy_fc, copy_proj)


def mlp(x: Tensor, w_fc: Tensor, b_fc: Tensor | None, w_proj: Tensor, b_proj: Tensor | None,
        approximate: str = "none", copy_fc: Tensor | None = None, copy_proj: Tensor | None = None) -> Tensor:
    """F.linear(F.gelu(F.linear(x, w_fc, b_fc), approximate=approximate), w_proj, b_proj) for a 2-d
    bf16/fp16 CUDA x (N, C), w_fc (H, C), w_proj (C, H) (weights and biases in any float dtype: cast
    like autocast casts them), on our GEMM with GELU fused into its epilogues. copy_fc / copy_proj: optional
    copies of the weights in x's dtype, kept by the caller (e.g. written by tk_kernels.AdamW), which the GEMMs
    read instead of casting the weights (they must equal the weights rounded to x's dtype: not checked).
    Raises ValueError for unsupported inputs."""
    if approximate not in APPROXIMATIONS:
        raise ValueError(f"tk mlp: approximate must be 'none' or 'tanh', got {approximate!r}")
    reason = (_public_reason(x, w_fc, w_proj) or _copy_reason("tk mlp", w_fc, copy_fc, x.dtype)
              or _copy_reason("tk mlp", w_proj, copy_proj, x.dtype))
    if reason is not None:
        raise ValueError(reason)
    return mlp_op(x, w_fc, b_fc, w_proj, b_proj, approximate, copy_fc, copy_proj)


def linear_op(x: Tensor, w: Tensor, b: Tensor | None, copy: Tensor | None = None) -> Tensor:
    """The linear op without argument checks, for callers that checked already (tk_kernels.dispatch.linear: the
    model's attention projections): the custom op under torch.compile, its autograd.Function twin in eager mode
    (_EagerLinear). copy: as mlp_op's copies."""
    if torch.compiler.is_compiling():
        return torch.ops.tk.linear_fwd(x, w, b, copy)[0]
    return _EagerLinear.apply(x, w, b, copy)


def linear(x: Tensor, w: Tensor, b: Tensor | None = None, copy: Tensor | None = None) -> Tensor:
    """F.linear(x, w, b) for a 2-d bf16/fp16 CUDA x (N, K) and a weight w (M, K) on our GEMM (w and b in any float
    dtype: cast like autocast casts them; their gradients come back in their dtypes). copy: an optional copy of
    w in x's dtype that the GEMM reads instead of casting w (as mlp's copies). Raises ValueError for
    unsupported inputs."""
    reason = _public_reason(x, w) or _copy_reason("tk linear", w, copy, x.dtype)
    if reason is not None:
        raise ValueError(reason)
    return linear_op(x, w, b, copy)
