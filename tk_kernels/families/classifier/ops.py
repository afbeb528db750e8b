"""
The classifier (lm_head + cross-entropy) on our fused softmax kernel, as torch custom ops with autograd.

    import tk_kernels
    loss = tk_kernels.linear_cross_entropy(x, weight, targets)   # x (N, C), weight (V, C), targets (N,)

is F.cross_entropy(F.linear(x, weight).float(), targets, ignore_index=-1): the mean over the
targets that are not ignore_index of logsumexp(logits) - logits[target]. The logits have the
precision of today's model under autocast: x @ weight^T from a bf16/fp16 GEMM (fp32 accumulate)
rounded to the input dtype, then upcast; softmax, log and loss are fp32. All ignored -> NaN (0/0),
like F.cross_entropy.

The (N, V) logits never exist at once. The forward walks the tokens in chunks (CHUNK_BYTES of
logits at a time: 2048 rows at V = 50304) and per chunk runs
    logits = x_c @ W^T                         cuBLAS, into one reused chunk buffer
    our kernel, in place: loss per row, and logits <- softmax - onehot(target)  (0 for ignored rows)
    dx_c   = dlogits @ W                       cuBLAS, into dx
    dW    += dlogits^T @ x_c / n_chunks        cuBLAS (addmm, scaled in its fp32 epilogue)
so the forward leaves the loss and the unscaled gradients dx, dW; the backward (tk::linear_cross_entropy_bwd,
csrc/scale.cu) multiplies them by grad_output / count (count: the non-ignored targets, a device tensor, no
host sync) in fp32 and never recomputes the softmax. The kernel writes softmax - onehot without the 1/count factor, so fp16
gradients do not underflow where F.cross_entropy's would. Targets outside [0, V) that are not
ignore_index give a NaN loss (F.cross_entropy stops with a device assert instead).

dW precision: dw is a (V, C) tensor of the inputs' dtype and each chunk's addmm reads it back (beta = 1),
so a bf16 dW is rounded once per chunk (8 times for the 16384 tokens of a GPT-2 step at V = 50304, 32
times for 65536) and once more when the backward scales it, where PyTorch's single GEMM rounds once.
Liger-Kernel's fused linear cross-entropy does the same by default (its weight gradient stays in the
parameter dtype unless an fp32 accumulation dtype is asked for); an fp32 (V, C) accumulator would cost
154 MB more at 50304 x 768. What it costs, from float64 CPU simulations with bf16 rounding where the GPU
rounds (not GPU measurements): the review's simulation (V = 2048, C = 128) gave a relative L2 dW error of
1.7e-3 for one chunk, 3.5e-3 for 8 and 6.7e-3 for 32 (1.66e-3 for a dW rounded once);
dev/classifier_dw_rounding.py, which also models the backward's scaling, gives 2.4e-3 / 3.9e-3 / 6.8e-3
there and 4.3e-3 at 8 chunks of 2048 rows at V = 50304: 1.4x / 2.4-2.6x / 4.1-5.0x the error of the
correctly rounded dW. tests/classifier/test_classifier_gpu.py bounds it, per chunk count n, by
1.2 sqrt(1.6 + 0.75 n) times both PyTorch's error and the correctly rounded one.

Three ops are registered (eager and torch.compile without graph breaks):
    tk::linear_cross_entropy_fwd(x, weight, targets, ignore_index) -> (loss, dx, dw, scales)
    tk::linear_cross_entropy_bwd(dloss, dx, dw, scales) -> (grad x, grad weight)   (the fwd op's backward)
    tk::linear_cross_entropy_loss(x, weight, targets, ignore_index) -> loss   (no gradient wanted: eval)
with x (N, C) and weight (V, C) bf16/fp16 CUDA tensors of one dtype, targets (N,) int64, V <= 65536:
the fp32 loss, the unscaled gradients dx and dw in the inputs' dtype, and the (2,) fp32 factors
[1 / count, n_chunks / count] that the backward multiplies them by.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ...compile_support import register_inductor_fallbacks
from ...support import capability_reason, device_reason, extension

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
MAX_VOCAB = 65536      # the kernel keeps a row in registers: 512 threads x 16 vectors of 8 elements
CHUNK_BYTES = 1 << 28  # logits held at a time: 256 MiB


def _ext():
    """The compiled classifier extension (built on first use, then cached on disk and per process)."""
    return extension("classifier")


def chunk_rows(n_rows: int, vocab_size: int) -> int:
    """Tokens per chunk: the largest power of two whose (rows, V) 16-bit logits fit CHUNK_BYTES
    (2048 at V = 50304), at most n_rows, at least 1."""
    rows = 1
    while rows * 2 * vocab_size * 2 <= CHUNK_BYTES:
        rows *= 2
    return max(1, min(rows, n_rows))


def _chunked(x: Tensor, weight: Tensor, targets: Tensor, ignore_index: int, row_loss: Tensor,
             dx: Tensor | None, dw: Tensor | None) -> int:
    """The chunk loop: per chunk of rows the logits GEMM and our kernel (row losses, and the chunk's logits
    turned into softmax - onehot in place), then, if dx and dw are given, the two gradient GEMMs.
    Returns the number of chunks."""
    N, V = x.shape[0], weight.shape[0]
    rows = chunk_rows(N, V)
    n_chunks = max(1, (N + rows - 1) // rows)
    if N == 0:
        return n_chunks
    ext = _ext()
    logits = x.new_empty((rows, V))  # the one chunk of logits, reused
    w_t = weight.t()
    # the chunks' views, made by one split() per tensor (not four slices per chunk)
    dx_chunks = dx.split(rows) if dx is not None else [None] * n_chunks
    chunks = zip(x.split(rows), targets.split(rows), row_loss.split(rows), dx_chunks)
    with torch.autocast(x.device.type, enabled=False):  # the op's dtypes are its inputs' dtypes
        for i, (xc, tc, lc, dxc) in enumerate(chunks):
            lg = logits if xc.shape[0] == rows else logits[:xc.shape[0]]
            torch.mm(xc, w_t, out=lg)
            ext.softmax_xent_grad_(lg, tc, lc, ignore_index)
            if dx is None:
                continue
            torch.mm(lg, weight, out=dxc)
            # dW summed over the chunks, each scaled by 1/n_chunks in cuBLAS's fp32 epilogue:
            # bounded like a mean, so fp16 does not overflow
            dw.addmm_(lg.t(), xc, beta=0.0 if i == 0 else 1.0, alpha=1.0 / n_chunks)
    return n_chunks


@torch.library.custom_op("tk::linear_cross_entropy_fwd", mutates_args=(), device_types="cuda")
def linear_cross_entropy_fwd(x: Tensor, weight: Tensor, targets: Tensor, ignore_index: int,
                             copy: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(loss, dx, dw, scales): the fp32 loss, the unscaled gradients dx (N, C) and dw (V, C) in the
    inputs' dtype, and the fp32 factors (2,) that turn them into d loss / dx and d loss / dw. copy: a copy of
    weight in x's dtype (the model's, GPT.keep_weight16) that the GEMMs read in its place; weight itself (any
    float dtype) then only gives its gradient's dtype."""
    weight = weight if copy is None else copy
    x, weight, targets = x.contiguous(), weight.contiguous(), targets.contiguous()
    dx = torch.empty_like(x)
    dw = torch.empty_like(weight)
    row_loss = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
    count = (targets != ignore_index).sum(dtype=torch.float32)
    n_chunks = _chunked(x, weight, targets, ignore_index, row_loss, dx, dw)
    if x.shape[0] == 0:
        dw.zero_()
    scales = torch.stack([1.0 / count, n_chunks / count])
    return row_loss.sum() / count, dx, dw, scales


@torch.library.custom_op("tk::linear_cross_entropy_loss", mutates_args=(), device_types="cuda")
def linear_cross_entropy_loss(x: Tensor, weight: Tensor, targets: Tensor, ignore_index: int) -> Tensor:
    """The fp32 loss alone, for evaluation: the logits GEMM and the kernel per chunk, without the two
    gradient GEMMs the training op runs in its forward (two thirds of its FLOPs). The same loss as
    linear_cross_entropy_fwd's, bitwise. No autograd: linear_cross_entropy_op calls it only when no
    gradient is wanted."""
    x, weight, targets = x.contiguous(), weight.contiguous(), targets.contiguous()
    row_loss = torch.empty(x.shape[0], device=x.device, dtype=torch.float32)
    count = (targets != ignore_index).sum(dtype=torch.float32)
    _chunked(x, weight, targets, ignore_index, row_loss, None, None)
    return row_loss.sum() / count


@linear_cross_entropy_loss.register_fake
def _linear_cross_entropy_loss_fake(x, weight, targets, ignore_index):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    return torch.empty((), device=x.device, dtype=torch.float32)


@linear_cross_entropy_fwd.register_fake
def _linear_cross_entropy_fwd_fake(x, weight, targets, ignore_index, copy=None):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    weight = weight if copy is None else copy
    f32 = dict(device=x.device, dtype=torch.float32)
    return (torch.empty((), **f32), torch.empty_like(x, memory_format=torch.contiguous_format),
            torch.empty_like(weight, memory_format=torch.contiguous_format), torch.empty((2,), **f32))


def _setup_context(ctx, inputs, output):
    _, dx, dw, scales = output
    ctx.save_for_backward(dx, dw, scales)
    ctx.mark_non_differentiable(dx, dw, scales)
    # with a 16-bit copy, the gradient goes to the weight in fp32 straight from the scaling kernel (no 16-bit
    # product, no autograd cast after it); other weight dtypes get dw's and autograd casts it
    ctx.dw_f32 = inputs[4] is not None and inputs[1].dtype == torch.float32


@torch.library.custom_op("tk::linear_cross_entropy_bwd", mutates_args=(), device_types="cuda")
def linear_cross_entropy_bwd(dloss: Tensor, dx: Tensor, dw: Tensor, scales: Tensor,
                             dw_f32: bool = False) -> tuple[Tensor, Tensor]:
    """(dx * s[0], dw * s[1]) with s = float(dloss) * scales: the gradients from the forward's unscaled ones,
    the fp32 products rounded once (dw's kept in fp32 when dw_f32), on our vectorised kernel (csrc/scale.cu:
    0.054 ms for the two at C = 768, V = 50304, where PyTorch's mixed-dtype `dx * s[0]` took 0.197 ms and
    rounded s to bf16 first)."""
    s = dloss.float() * scales
    ext = _ext()
    return ext.mul_scalar(dx, s[0:1]), ext.mul_scalar(dw, s[1:2], dw_f32)


@linear_cross_entropy_bwd.register_fake
def _linear_cross_entropy_bwd_fake(dloss, dx, dw, scales, dw_f32=False):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    return (torch.empty_like(dx, memory_format=torch.contiguous_format),
            torch.empty_like(dw, memory_format=torch.contiguous_format,
                             dtype=torch.float32 if dw_f32 else dw.dtype))


def _backward(ctx, dloss, _ddx, _ddw, _dscales):
    dx, dw, scales = ctx.saved_tensors
    if dloss is None:
        return None, None, None, None, None
    gx, gw = torch.ops.tk.linear_cross_entropy_bwd(dloss, dx, dw, scales, ctx.dw_f32)
    return gx, gw, None, None, None


linear_cross_entropy_fwd.register_autograd(_backward, setup_context=_setup_context)


# -----------------------------------------------------------------------------
# support checks

def unsupported_reason(device: torch.device, dtype: torch.dtype, dims: dict) -> str | None:
    """Why the tk classifier cannot run for a model of these dims ({"n_embd", "vocab_size", ...})
    on inputs of this device and dtype, or None if it can: the check tk_kernels/dispatch.py makes
    once per plan. May build the extension."""
    if device.type != "cuda":
        return f"no CUDA GPU (tensors are on {device.type}); the TK kernels need an NVIDIA GPU"
    if dtype not in SUPPORTED_DTYPES:
        return f"tk classifier supports dtypes bfloat16 and float16, got {dtype}"
    vocab = dims.get("vocab_size")
    if vocab is not None and not 1 <= vocab <= MAX_VOCAB:
        return f"tk classifier supports vocabulary sizes 1 to {MAX_VOCAB}, got vocab_size={vocab}"
    if not torch.cuda.is_available():
        return "no usable CUDA GPU (torch.cuda.is_available() is False)"
    return environment_reason(device)


def gpu_reason(major: int, minor: int, name: str) -> str | None:
    """Why the kernel cannot run on GPU `name` of compute capability major.minor, or None. No GPU query."""
    return capability_reason("tk classifier", major, minor, name)


def build_reason(major: int, minor: int) -> str | None:
    """Why the extension cannot run on this compute capability (it does not build / load, other archs)."""
    from tk_kernels.build import load_reason  # not at import (python -m tk_kernels.build)
    return load_reason("classifier", major, minor)


_env_reasons: dict[int, str | None] = {}  # device index -> environment_reason

def environment_reason(device: torch.device) -> str | None:
    """Why the kernel cannot run on this CUDA device (GPU generation, build), or None; once per device."""
    return device_reason(_env_reasons, device, gpu_reason, build_reason)


def tensor_reason(x, weight, targets, ignore_index=-1) -> str | None:
    """Checks on the arguments alone (no GPU queries): safe to trace under torch.compile."""
    for name, t in (("x", x), ("weight", weight), ("targets", targets)):
        if not isinstance(t, Tensor):
            return f"tk classifier: {name} must be a torch.Tensor, got {type(t).__name__}"
    if x.device.type != "cuda":
        return f"tk classifier runs on CUDA devices only; x is on {x.device}"
    if weight.device != x.device or targets.device != x.device:
        return (f"tk classifier: x, weight, targets must be on one device, got {x.device}, "
                f"{weight.device}, {targets.device}")
    if x.dtype not in SUPPORTED_DTYPES or weight.dtype != x.dtype:
        return (f"tk classifier needs x and weight both bfloat16 or both float16, got {x.dtype} and "
                f"{weight.dtype} (under autocast, dispatch.linear_cross_entropy casts them)")
    if x.dim() != 2 or weight.dim() != 2 or x.shape[1] != weight.shape[1]:
        return (f"tk classifier needs x (N, C) and weight (V, C), got shapes {tuple(x.shape)} and "
                f"{tuple(weight.shape)}")
    if not 1 <= weight.shape[0] <= MAX_VOCAB:
        return f"tk classifier supports vocabulary sizes 1 to {MAX_VOCAB}, got V={weight.shape[0]}"
    if targets.dtype != torch.long or targets.shape != (x.shape[0],):
        return (f"tk classifier needs int64 targets of shape ({x.shape[0]},), got {targets.dtype} of "
                f"shape {tuple(targets.shape)}")
    if not isinstance(ignore_index, int):
        return f"tk classifier: ignore_index must be an int, got {type(ignore_index).__name__}"
    return None


# -----------------------------------------------------------------------------
# public API

def linear_cross_entropy_op(x: Tensor, weight: Tensor, targets: Tensor, ignore_index: int = -1,
                            copy: Tensor | None = None) -> Tensor:
    """The op without argument checks, for callers that checked already (tk_kernels.dispatch): the
    training op if a gradient is wanted, else the loss-only one (evaluation, no_grad). copy: a copy of
    weight in x's dtype that the GEMMs read instead (weight then gets the gradient, in its own dtype)."""
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad):
        loss, _, _, _ = torch.ops.tk.linear_cross_entropy_fwd(x, weight, targets, ignore_index, copy)
        return loss
    return torch.ops.tk.linear_cross_entropy_loss(x, weight if copy is None else copy, targets, ignore_index)


def linear_cross_entropy(x: Tensor, weight: Tensor, targets: Tensor, ignore_index: int = -1) -> Tensor:
    """Mean cross-entropy of the logits F.linear(x, weight) over the targets that are not
    ignore_index, like F.cross_entropy(F.linear(x, weight).float(), targets, ignore_index=...), for
    x (N, C) and weight (V, C) bf16/fp16 CUDA tensors of one dtype, targets (N,) int64, V <= 65536,
    without materialising the (N, V) logits. The logits are the bf16/fp16 result of the GEMM (fp32
    accumulate), upcast to fp32 for softmax and loss; the loss is fp32. Gradients flow to x and
    weight (a tied embedding accumulates as usual). Raises ValueError for unsupported inputs."""
    reason = tensor_reason(x, weight, targets, ignore_index)
    if reason is None and not torch.compiler.is_compiling():
        reason = environment_reason(x.device)
    if reason is not None:
        raise ValueError(reason)
    return linear_cross_entropy_op(x, weight, targets, ignore_index)
