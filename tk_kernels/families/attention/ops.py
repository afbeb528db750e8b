"""
Flash attention on the tk_kernels CUDA kernels, as torch custom ops with autograd.

    import tk_kernels
    y = tk_kernels.attention(q, k, v, causal=True)   # same as F.scaled_dot_product_attention(q, k, v, is_causal=True)
    y = tk_kernels.attention(q, k, v, dropout_p=0.2) # dropout on the attention probabilities (training)

Four ops are registered (they work in eager mode and inside torch.compile without graph breaks; in eager
mode tk_kernels.attention and the dispatch call their implementations through an autograd.Function,
_EagerAttention / _EagerAttentionQKV, with the same saved tensors and backward, skipping the custom-op dispatch):
    tk::attention_fwd(q, k, v, causal, scale, dropout_p) -> (o, lse, rng_state)
    tk::attention_bwd(q, k, v, o, lse, dout, causal, scale, deterministic, dropout_p, rng_state) -> (dq, dk, dv)
    tk::attention_qkv_fwd(qkv, n_head, causal, scale, dropout_p, bias=None) -> (o, lse, rng_state)
    tk::attention_qkv_bwd(qkv, o, lse, dout, n_head, causal, scale, deterministic, dropout_p, rng_state,
                          bias_grad=False) -> (dqkv, dbias)
q, k, v are (B, H, T, D) bf16/fp16 CUDA tensors with D in {64, 128}; any strides (views of a fused
qkv tensor run without a copy). o, dq, dk, dv come back as (B, H, T, D) views of (B, T, H, D)
memory, so o.transpose(1, 2).view(B, T, H * D) is free. lse is the (B, H, T) fp32 natural-log
log-sum-exp of the scaled scores (of the softmax before dropout).
The qkv ops take the fused projection itself, qkv (B, T, 3 * H * D) as model.py's c_attn makes it (q, k, v are
its views qkv_views(qkv, H), as model.py splits it), and return the same o, lse, rng_state; their backward
allocates dqkv, the contiguous (B, T, 3 * H * D) gradient of qkv, once and has the kernels write dq, dk, dv
straight into its three views (the extension's attention_backward_into). The q, k, v ops' gradients instead
come back as three tensors that autograd concatenates into that layout for c_attn's GEMMs: one more read and
write of 3 B T C 16-bit values per layer (GPT-2 124M, B=16, T=1024: ~150 MB per layer).
The qkv forward may also take the projection's bias (already inside qkv; not read): its backward then returns the
bias's gradient too, [sums of dq | 0 | sums of dv] over batch and tokens, which the Hopper backward without dropout
sums in its row passes (csrc/qkv_bias_grad.cuh: the prep kernel's dO, the dQ convert's dq) instead of c_attn's
backward reading dqkv again for it (GPT-2's layer on an H100: backward + column sums 343.5 us -> 325.0 us, session
32); model.py hands c_attn's bias over where dispatch.attention_sums_qkv_bias says so.

Dropout (dropout_p in [0, 1)) drops each element of the softmax P with probability dropout_p and
scales the kept ones by 1 / (1 - dropout_p), like F.scaled_dot_product_attention(dropout_p=...).
The keep mask is a pure function of (seed, offset, b * H + h, query, key) (Philox4x32-10, in
csrc/dropout.cuh); the forward takes seed and offset from PyTorch's default CUDA generator of the
device (so torch.manual_seed reproduces a run and every call draws a new mask; CUDA-graph safe) and
returns them as rng_state, a (2,) int64 CUDA tensor [seed, offset] (empty (0,) when dropout_p == 0:
no generator state is drawn then); the backward regenerates the same mask from it.
dropout_mask(rng_state, B, H, T, dropout_p) returns that mask, for tests.

Forward kernel: on an sm_90 GPU (H100, H200) with an extension built for sm_90a (the default there)
the forward runs csrc/hopper_forward.cu (wgmma + TMA, warp-specialised), with or without dropout;
everywhere else csrc/forward.cu (mma.sync, sm_80+). Both write the same o and lse, and with dropout
both apply the same keep mask (the same function of (seed, offset, b * H + h, query, key)), so either
backward fits either forward. TK_ATTENTION_PATH=hopper|portable forces one (hopper on a GPU that cannot
run it is an error); forward_path() says which one a call takes.

Backward kernel: csrc/hopper_backward.cu (wgmma + TMA) where the forward takes the Hopper path, with or
without dropout, outside the deterministic mode; csrc/backward*.cu (mma.sync) otherwise, or always with
TK_ATTENTION_BWD=portable (backward_path() says which one a call takes).

The backward accumulates dQ with fp32 atomics (fast; dQ may differ in the last bits between runs).
It is bitwise reproducible when torch.use_deterministic_algorithms(True) is on or TK_DETERMINISTIC=1.
"""

from __future__ import annotations

import math
import os

import torch
from torch import Tensor

from ...compile_support import register_inductor_fallbacks
from ...support import capability_reason, device_reason, extension

SUPPORTED_DTYPES = (torch.bfloat16, torch.float16)
SUPPORTED_HEAD_DIMS = (64, 128)
# Opt-in shared memory per block that the kernels need at least: the largest of their smallest
# configurations (the csrc/ backward: the D=64 backward with 64-query blocks, 99,456 B). The
# backward picks its configuration at launch: the faster large ones (up to ~225 KB) where the GPU
# offers them (A100, H100, H200), the small ones on 99 KB GPUs (RTX 30xx/40xx, 101,376 B).
# The extension's min_smem_bytes() computes the same number from the kernels (a GPU test checks).
# TK_SMEM_LIMIT=<bytes> caps what the portable backward's launcher may use (a testing override:
# TK_SMEM_LIMIT=101376 with TK_ATTENTION_BWD=portable makes an H100/H200 run the RTX configurations; the
# Hopper backward, the default there, does not read it).
MIN_SMEM_BYTES = 99_456


# -----------------------------------------------------------------------------
# the custom ops

def _ext():
    """The compiled attention extension (built on first use, then cached on disk and per process)."""
    return extension("attention")


def _kernel_ready(t: Tensor) -> Tensor:
    """t itself if the kernels can read it in place (last dim contiguous, 16-byte aligned base and
    strides, needed by 16-byte cp.async), else a fresh contiguous copy (e.g. an expanded grad)."""
    strides = t.stride()  # one call for all dims: the op checks five tensors per call
    if strides[-1] == 1 and t.data_ptr() % 16 == 0:
        for stride, size in zip(strides[:-1], t.shape):
            if stride % 8 != 0 and size != 1:
                break
        else:
            return t
    return t.clone(memory_format=torch.contiguous_format)


def _empty_bthd(x: Tensor, dtype: torch.dtype | None = None) -> Tensor:
    """Empty (B, H, T, D) tensor laid out as (B, T, H, D) in memory, like the kernel outputs."""
    B, H, T, D = x.shape
    return x.new_empty((B, T, H, D), dtype=dtype).transpose(1, 2)


ATTENTION_PATHS = ("auto", "hopper", "portable")
_hopper_reasons: dict[int, str | None] = {}  # device index -> hopper_reason


def _hopper_gpu_reason(major: int, minor: int, name: str) -> str | None:
    if (major, minor) != (9, 0):
        return (f"the Hopper attention forward needs an sm_90 GPU (H100, H200); {name} is compute capability "
                f"{major}.{minor}")
    return None


def _hopper_build_reason(major: int, minor: int) -> str | None:
    from tk_kernels.build import arch_reason  # not at import: `python -m tk_kernels.build` imports this file
    return arch_reason(_ext(), "attention", "sm_90a", "the Hopper forward")


def hopper_reason(device: torch.device) -> str | None:
    """Why the sm_90a forward cannot run on this CUDA device (not an sm_90 GPU, or an extension built
    without sm_90a), or None if it can; computed once per device (may build the extension)."""
    return device_reason(_hopper_reasons, device, _hopper_gpu_reason, _hopper_build_reason)


def tma_ready(t: Tensor) -> bool:
    """Whether TMA can read (B, H, T, D) tensor t as it is: every stride but the last (1) a nonzero
    multiple of 16 bytes (a head-broadcast k/v, stride 0, is not)."""
    sb, sh, st, sd = t.stride()
    e = t.element_size()
    return (sd == 1 and sb > 0 and sh > 0 and st > 0
            and (sb * e) % 16 == 0 and (sh * e) % 16 == 0 and (st * e) % 16 == 0)


def _env_choice(name: str, choices: tuple[str, ...], default: str) -> str:
    """The value of environment variable `name` (stripped, lower case; unset or empty: default), which
    must be one of choices (else ValueError). Read at every call: tests and users may set it any time."""
    raw = os.environ.get(name)
    choice = (raw.strip().lower() if raw else "") or default
    if choice not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {choice!r}")
    return choice


def _forward_kernel(device: torch.device, dropout_p: float, tma_ok: bool) -> str:
    """forward_path's decision, with tma_ok: whether TMA can read every operand (the op computes it once
    for its operands and reuses it for the copies of the forced Hopper path)."""
    choice = _env_choice("TK_ATTENTION_PATH", ATTENTION_PATHS, "auto")
    if choice == "portable":
        return "portable"
    reason = hopper_reason(device)
    if choice == "hopper" and reason is not None:
        raise RuntimeError(f"TK_ATTENTION_PATH=hopper, but {reason}")
    if reason is not None or (choice == "auto" and not tma_ok):
        return "portable"
    return "hopper"


def forward_path(q: Tensor, dropout_p: float = 0.0, *kv: Tensor) -> str:
    """'hopper' or 'portable': the forward kernel a call with this q (and k, v, if given) and dropout_p
    runs (both kernels have dropout, with the same mask: dropout_p does not change the choice).
    Default (TK_ATTENTION_PATH unset or 'auto'): hopper where hopper_reason is None and TMA can read
    every operand as laid out (tma_ready: a head-broadcast k/v takes the portable kernel).
    TK_ATTENTION_PATH=portable always takes the portable kernel; =hopper takes the Hopper kernel
    (operands TMA cannot read are copied) and raises RuntimeError where it cannot run."""
    return _forward_kernel(q.device, dropout_p, all(tma_ready(t) for t in (q, *kv)))


BACKWARD_PATHS = ("portable", "hopper")


def backward_path(q: Tensor, dropout_p: float = 0.0, deterministic: bool = False, *kv: Tensor) -> str:
    """'hopper' or 'portable': the backward kernel a call with this q (and k, v, if given) runs.
    Default (TK_ATTENTION_BWD unset or 'hopper'): csrc/hopper_backward.cu wherever forward_path says
    'hopper' for these operands (TK_ATTENTION_PATH applies), dropout included, except for a deterministic
    backward, which stays on the portable kernels. TK_ATTENTION_BWD=portable always takes csrc/backward*.cu.
    On the H200 the Hopper backward measured 1.0-1.6x the portable one at every benchmark shape but
    (64,6,256,64) (0.92x causal, 0.98x non-causal; bench/RESULTS.md, session 4)."""
    return _backward_kernel(q.device, dropout_p, deterministic, lambda: all(tma_ready(t) for t in (q, *kv)))


def _backward_kernel(device: torch.device, dropout_p: float, deterministic: bool, tma_ok) -> str:
    """backward_path's decision; tma_ok() says whether TMA can read q, k and v (asked only where the
    forward's choice matters)."""
    choice = _env_choice("TK_ATTENTION_BWD", BACKWARD_PATHS, "hopper")
    if choice == "portable" or deterministic:
        return "portable"
    return _forward_kernel(device, dropout_p, tma_ok())


def _forward_impl(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float,
                  dropout_p: float) -> tuple[Tensor, Tensor, Tensor]:
    q, k, v = _kernel_ready(q), _kernel_ready(k), _kernel_ready(v)
    tq, tk, tv = tma_ready(q), tma_ready(k), tma_ready(v)
    if _forward_kernel(q.device, dropout_p, tq and tk and tv) == "hopper":
        if not (tq and tk and tv):  # only when forced
            q, k, v = (t if ok else t.contiguous() for t, ok in ((q, tq), (k, tk), (v, tv)))
        return _ext().attention_forward_hopper(q, k, v, causal, scale, dropout_p)
    return _ext().attention_forward(q, k, v, causal, scale, dropout_p)


@torch.library.custom_op("tk::attention_fwd", mutates_args=(), device_types="cuda")
def attention_fwd(q: Tensor, k: Tensor, v: Tensor, causal: bool, scale: float,
                  dropout_p: float) -> tuple[Tensor, Tensor, Tensor]:
    return _forward_impl(q, k, v, causal, scale, dropout_p)


@attention_fwd.register_fake
def _attention_fwd_fake(q, k, v, causal, scale, dropout_p):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    B, H, T, D = q.shape
    rng_state = q.new_empty((2 if dropout_p > 0.0 else 0,), dtype=torch.int64)
    return _empty_bthd(q), q.new_empty((B, H, T), dtype=torch.float32), rng_state


def _backward_impl(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, dout: Tensor,
                   causal: bool, scale: float, deterministic: bool, dropout_p: float,
                   rng_state: Tensor,
                   out: tuple[Tensor, Tensor, Tensor] | None = None,
                   dbias: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """(dq, dk, dv) of the kernel the path choice picks: fresh (B, T, H, D) tensors, or written into out (three
    (B, H, T, D) tensors the kernels can store to: stride 1 along D, 16-byte aligned, strides multiples of 8
    elements, no shared memory; the extension checks) and out returned. With out, dbias (a (3 H D) float32 tensor)
    also gets the gradient of the bias of the fused projection q, k, v are views of: [sum of dq | 0 | sum of dv]
    over batch and tokens (csrc/qkv_bias_grad.cuh), summed by the Hopper backward's row passes without dropout
    and by PyTorch from dq and dv otherwise."""
    q, k, v, o, dout = _kernel_ready(q), _kernel_ready(k), _kernel_ready(v), _kernel_ready(o), _kernel_ready(dout)
    lse = lse.contiguous()
    tma = []  # tma_ready of q, k, v, o, dout, computed once where the Hopper backward is a candidate

    def tma_ok() -> bool:
        tma.extend(tma_ready(t) for t in (q, k, v, o, dout))
        return tma[0] and tma[1] and tma[2]
    hopper = _backward_kernel(q.device, dropout_p, deterministic, tma_ok) == "hopper"
    if hopper:
        if not tma:  # TK_ATTENTION_PATH=hopper did not ask
            tma_ok()
        if not all(tma):  # only when forced
            q, k, v, o, dout = (t if ok else t.contiguous() for t, ok in zip((q, k, v, o, dout), tma))
    if out is not None:
        in_kernel = dbias is not None and hopper and dropout_p == 0.0
        _ext().attention_backward_into(q, k, v, o, lse, dout, *out, causal, scale, deterministic, dropout_p, rng_state,
                                       hopper, dbias if in_kernel else None)
        if dbias is not None and not in_kernel:
            _qkv_bias_grad(out[0], out[2], dbias)
        return out
    if hopper:
        return _ext().attention_backward_hopper(q, k, v, o, lse, dout, causal, scale, dropout_p, rng_state)
    return _ext().attention_backward(q, k, v, o, lse, dout, causal, scale, deterministic, dropout_p, rng_state)


def _qkv_bias_grad(dq: Tensor, dv: Tensor, dbias: Tensor) -> None:
    """dbias <- [dq's sums | 0 | dv's sums] over batch and tokens in float32, heads side by side: the gradient of the
    fused projection's bias where the Hopper backward's row passes do not sum it. d b_k is exactly 0 (softmax
    cancels the constant q_i . b_k a query row gets), and so it is here."""
    hd = dq.shape[1] * dq.shape[3]
    dbias[:hd] = dq.sum((0, 2), dtype=torch.float32).flatten()
    dbias[hd:2 * hd] = 0.0
    dbias[2 * hd:] = dv.sum((0, 2), dtype=torch.float32).flatten()


@torch.library.custom_op("tk::attention_bwd", mutates_args=(), device_types="cuda")
def attention_bwd(q: Tensor, k: Tensor, v: Tensor, o: Tensor, lse: Tensor, dout: Tensor,
                  causal: bool, scale: float, deterministic: bool, dropout_p: float,
                  rng_state: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    return _backward_impl(q, k, v, o, lse, dout, causal, scale, deterministic, dropout_p, rng_state)


@attention_bwd.register_fake
def _attention_bwd_fake(q, k, v, o, lse, dout, causal, scale, deterministic, dropout_p, rng_state):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    return _empty_bthd(q), _empty_bthd(k), _empty_bthd(v)


def deterministic_backward() -> bool:
    """Whether the backward must be bitwise reproducible (no atomics in dQ)."""
    return torch.are_deterministic_algorithms_enabled() or os.environ.get("TK_DETERMINISTIC", "0") == "1"


def _setup_context(ctx, inputs, output):
    q, k, v, causal, scale, dropout_p = inputs
    o, lse, rng_state = output
    ctx.save_for_backward(q, k, v, o, lse, rng_state)
    ctx.causal, ctx.scale, ctx.dropout_p = causal, scale, dropout_p
    ctx.mark_non_differentiable(lse, rng_state)


def _backward(ctx, dout, dlse, drng, bwd=None):
    # dlse and drng are ignored: lse and rng_state are marked non-differentiable. bwd: the backward op
    # to call (the custom op by default, its implementation itself on the eager path)
    q, k, v, o, lse, rng_state = ctx.saved_tensors
    if dout is None:
        return None, None, None, None, None, None
    bwd = torch.ops.tk.attention_bwd if bwd is None else bwd
    dq, dk, dv = bwd(q, k, v, o, lse, dout, ctx.causal, ctx.scale, deterministic_backward(), ctx.dropout_p, rng_state)
    return dq, dk, dv, None, None, None


attention_fwd.register_autograd(_backward, setup_context=_setup_context)


class _EagerAttention(torch.autograd.Function):
    """attention_fwd with its registered backward, for eager mode: the same kernels, saved tensors and
    gradients, without the custom-op dispatch around the forward and the backward (dev/host_overhead.py:
    150 -> 88 us of host time per fwd + bwd on the CPU machine, stubbed kernels). An unused o gets no
    zero-filled gradient, nor do lse and rng_state (set_materialize_grads(False)). torch.compile traces
    the custom ops."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, dropout_p):
        ctx.set_materialize_grads(False)
        out = _forward_impl(q, k, v, causal, scale, dropout_p)
        _setup_context(ctx, (q, k, v, causal, scale, dropout_p), out)
        return out

    @staticmethod
    def backward(ctx, dout, dlse, drng):
        return _backward(ctx, dout, dlse, drng, bwd=_backward_impl)


# -----------------------------------------------------------------------------
# the same attention on the fused projection: tk::attention_qkv_fwd / tk::attention_qkv_bwd

def qkv_shape_reason(qkv, n_head) -> str | None:
    """Why qkv cannot be a fused (B, T, 3 * n_head * D) projection of n_head heads, or None."""
    if not isinstance(n_head, int) or isinstance(n_head, bool) or n_head < 1:
        return f"tk attention: n_head must be a positive int, got {n_head!r}"
    if qkv.dim() != 3 or qkv.shape[-1] % (3 * n_head) != 0:
        return (f"tk attention: qkv must be a (B, T, 3 * n_head * D) fused projection; got shape {tuple(qkv.shape)} "
                f"for n_head={n_head}")
    return None


def qkv_views(qkv: Tensor, n_head: int) -> tuple[Tensor, Tensor, Tensor]:
    """q, k, v: the (B, H, T, D) views of a fused (B, T, 3 * H * D) projection, split the way model.py
    splits it (no copies: view, permute, unbind)."""
    B, T, C3 = qkv.shape
    return qkv.view(B, T, 3, n_head, C3 // (3 * n_head)).permute(2, 0, 3, 1, 4).unbind(0)


def qkv_bias_reason(qkv, bias) -> str | None:
    """Why bias cannot be the bias of the fused projection qkv (a (3C,) tensor on qkv's device), or None."""
    if bias is None:
        return None
    if not isinstance(bias, Tensor) or bias.shape != (qkv.shape[-1],) or bias.device != qkv.device:
        got = f"shape {tuple(bias.shape)} on {bias.device}" if isinstance(bias, Tensor) else type(bias).__name__
        return f"tk attention: qkv_bias must be a ({qkv.shape[-1]},) tensor on {qkv.device}, got {got}"
    return None


def _check_qkv(qkv: Tensor, n_head: int, bias: Tensor | None = None) -> None:
    reason = qkv_shape_reason(qkv, n_head) or qkv_bias_reason(qkv, bias)
    if reason is not None:
        raise ValueError(reason)


# bias: the bias of the projection that made qkv, already inside qkv; the forward does not read it, the backward
# returns its gradient (csrc/qkv_bias_grad.cuh), so that the projection's backward need not sum qkv's gradient.
@torch.library.custom_op("tk::attention_qkv_fwd", mutates_args=(), device_types="cuda")
def attention_qkv_fwd(qkv: Tensor, n_head: int, causal: bool, scale: float,
                      dropout_p: float, bias: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    _check_qkv(qkv, n_head, bias)
    q, k, v = qkv_views(qkv, n_head)
    return _forward_impl(q, k, v, causal, scale, dropout_p)


@attention_qkv_fwd.register_fake
def _attention_qkv_fwd_fake(qkv, n_head, causal, scale, dropout_p, bias=None):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    _check_qkv(qkv, n_head, bias)
    B, T, C3 = qkv.shape
    D = C3 // (3 * n_head)
    rng_state = qkv.new_empty((2 if dropout_p > 0.0 else 0,), dtype=torch.int64)
    o = qkv.new_empty((B, T, n_head, D)).transpose(1, 2)  # as _forward_impl's kernels allocate it
    return o, qkv.new_empty((B, n_head, T), dtype=torch.float32), rng_state


def _qkv_backward_impl(qkv: Tensor, o: Tensor, lse: Tensor, dout: Tensor, n_head: int, causal: bool, scale: float,
                       deterministic: bool, dropout_p: float, rng_state: Tensor,
                       bias_grad: bool = False) -> tuple[Tensor, Tensor]:
    """(dqkv, dbias): qkv's gradient and, with bias_grad, its projection bias's ((3C,) float32; else empty)."""
    _check_qkv(qkv, n_head)
    dqkv = qkv.new_empty(qkv.shape)  # contiguous (B, T, 3C): c_attn's weight / input GEMMs read it as is
    dbias = qkv.new_empty((qkv.shape[-1] if bias_grad else 0,), dtype=torch.float32)
    q, k, v = qkv_views(qkv, n_head)
    _backward_impl(q, k, v, o, lse, dout, causal, scale, deterministic, dropout_p, rng_state,
                   out=qkv_views(dqkv, n_head), dbias=dbias if bias_grad else None)
    return dqkv, dbias


@torch.library.custom_op("tk::attention_qkv_bwd", mutates_args=(), device_types="cuda")
def attention_qkv_bwd(qkv: Tensor, o: Tensor, lse: Tensor, dout: Tensor, n_head: int, causal: bool, scale: float,
                      deterministic: bool, dropout_p: float, rng_state: Tensor,
                      bias_grad: bool = False) -> tuple[Tensor, Tensor]:
    return _qkv_backward_impl(qkv, o, lse, dout, n_head, causal, scale, deterministic, dropout_p, rng_state,
                              bias_grad)


@attention_qkv_bwd.register_fake
def _attention_qkv_bwd_fake(qkv, o, lse, dout, n_head, causal, scale, deterministic, dropout_p, rng_state,
                            bias_grad=False):
    register_inductor_fallbacks()  # torch.compile is tracing: see tk_kernels/compile_support.py
    _check_qkv(qkv, n_head)
    return qkv.new_empty(qkv.shape), qkv.new_empty((qkv.shape[-1] if bias_grad else 0,), dtype=torch.float32)


def _qkv_setup_context(ctx, inputs, output):
    qkv, n_head, causal, scale, dropout_p, bias = inputs
    o, lse, rng_state = output
    ctx.save_for_backward(qkv, o, lse, rng_state)
    ctx.n_head, ctx.causal, ctx.scale, ctx.dropout_p = n_head, causal, scale, dropout_p
    ctx.bias_dtype = None if bias is None else bias.dtype
    ctx.mark_non_differentiable(lse, rng_state)


def _qkv_backward(ctx, dout, dlse, drng, bwd=None):
    # as _backward: dlse, drng ignored; bwd the backward op to call (its implementation on the eager path)
    qkv, o, lse, rng_state = ctx.saved_tensors
    if dout is None:
        return None, None, None, None, None, None
    bwd = torch.ops.tk.attention_qkv_bwd if bwd is None else bwd
    bias_grad = ctx.bias_dtype is not None and ctx.needs_input_grad[5]
    dqkv, dbias = bwd(qkv, o, lse, dout, ctx.n_head, ctx.causal, ctx.scale, deterministic_backward(), ctx.dropout_p,
                      rng_state, bias_grad)
    return dqkv, None, None, None, None, dbias.to(ctx.bias_dtype) if bias_grad else None


attention_qkv_fwd.register_autograd(_qkv_backward, setup_context=_qkv_setup_context)


class _EagerAttentionQKV(torch.autograd.Function):
    """attention_qkv_fwd with its registered backward for eager mode, as _EagerAttention is for attention_fwd."""

    @staticmethod
    def forward(ctx, qkv, n_head, causal, scale, dropout_p, bias):
        ctx.set_materialize_grads(False)
        _check_qkv(qkv, n_head, bias)
        q, k, v = qkv_views(qkv, n_head)
        out = _forward_impl(q, k, v, causal, scale, dropout_p)
        _qkv_setup_context(ctx, (qkv, n_head, causal, scale, dropout_p, bias), out)
        return out

    @staticmethod
    def backward(ctx, dout, dlse, drng):
        return _qkv_backward(ctx, dout, dlse, drng, bwd=_qkv_backward_impl)


def dropout_mask(rng_state: Tensor, B: int, H: int, T: int, dropout_p: float) -> Tensor:
    """The (B, H, T, T) uint8 keep mask (1 = kept, before any causal mask) of the dropout that a
    forward with this rng_state (its third output: the (2,) int64 [seed, offset] it used) and
    dropout_p applied, computed on the GPU by the kernels' own keep function. For tests: a
    reference is then softmax(S) * mask / (1 - dropout_p) @ V. torch.tensor([seed, offset],
    dtype=torch.int64, device="cuda") gives the mask of any (seed, offset)."""
    return _ext().attention_dropout_mask(rng_state, B, H, T, float(dropout_p))


# -----------------------------------------------------------------------------
# support checks

def gpu_reason(capability: tuple[int, int], smem_optin: int | None, name: str) -> str | None:
    """Why the kernels cannot run on a GPU of this compute capability and opt-in shared memory per
    block (bytes; None if unknown), or None if they can. No GPU query, no build."""
    reason = capability_reason("tk attention", *capability, name)
    if reason is not None:
        return reason
    if smem_optin is not None and smem_optin < MIN_SMEM_BYTES:
        return (f"tk attention needs {MIN_SMEM_BYTES} bytes ({MIN_SMEM_BYTES / 1024:.1f} KB) of shared memory "
                f"per block; {name} offers {smem_optin} bytes (GPUs of compute "
                f"capability 8.0, 8.6, 8.9, 9.0 such as A100, RTX 3090, RTX 4090, H100 have enough)")
    return None


def build_reason(major: int, minor: int) -> str | None:
    """Why the extension cannot run on a GPU of compute capability major.minor (it does not
    build/load, or was built for other architectures), or None. Builds it if needed."""
    from tk_kernels.build import load_reason
    return load_reason("attention", major, minor)


_env_reasons: dict[int, str | None] = {}  # device index -> environment_reason (GPU queries, build)

def environment_reason(device: torch.device) -> str | None:
    """Why the kernels cannot run on this CUDA device (GPU generation, shared memory, build), or
    None if they can; computed once per device."""
    def gpu_here(major: int, minor: int, name: str) -> str | None:
        smem = getattr(torch.cuda.get_device_properties(device), "shared_memory_per_block_optin", None)
        return gpu_reason((major, minor), smem, name)
    return device_reason(_env_reasons, device, gpu_here, build_reason)


def tensor_reason(q, k, v, causal=True, scale=None, dropout_p=0.0) -> str | None:
    """Checks on the arguments alone (no GPU queries): safe to trace under torch.compile."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor):
            return f"tk attention: {name} must be a torch.Tensor, got {type(t).__name__}"
    if q.device.type != "cuda":
        return f"tk attention runs on CUDA devices only; q is on {q.device}"
    if k.device != q.device or v.device != q.device:
        return f"tk attention: q, k, v must be on the same device, got {q.device}, {k.device}, {v.device}"
    if q.dtype not in SUPPORTED_DTYPES:
        return f"tk attention supports dtypes bfloat16 and float16, got q.dtype={q.dtype}"
    if k.dtype != q.dtype or v.dtype != q.dtype:
        return f"tk attention: q, k, v must have the same dtype, got {q.dtype}, {k.dtype}, {v.dtype}"
    if q.dim() != 4:
        return f"tk attention expects 4-D (B, H, T, D) inputs, got q of shape {tuple(q.shape)}"
    if k.shape != q.shape or v.shape != q.shape:
        return (f"tk attention: q, k, v must have the same shape (B, H, T, D) (no cross-attention "
                f"or grouped heads), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    if q.shape[-1] not in SUPPORTED_HEAD_DIMS:
        return f"tk attention supports head dim D in {SUPPORTED_HEAD_DIMS}, got D={q.shape[-1]}"
    if q.shape[2] < 1:
        return "tk attention needs sequence length T >= 1, got T=0"
    if not isinstance(causal, bool):
        return f"tk attention: causal must be a bool, got {type(causal).__name__}"
    if scale is not None and not isinstance(scale, (int, float)):
        return f"tk attention: scale must be a Python float or None, got {type(scale).__name__}"
    if scale is not None and not (math.isfinite(scale) and scale > 0):
        return f"tk attention needs a positive finite scale (the kernel works in log2 units), got scale={scale}"
    if not isinstance(dropout_p, (int, float)) or isinstance(dropout_p, bool):
        return f"tk attention: dropout_p must be a Python float, got {type(dropout_p).__name__}"
    if not 0.0 <= dropout_p < 1.0:
        return f"tk attention supports dropout_p in [0, 1), got dropout_p={dropout_p}"
    return None


def check_supported(q, k, v, causal: bool = True, scale: float | None = None,
                    dropout_p: float = 0.0) -> str | None:
    """None if tk attention can run on these inputs here, else a human-readable reason naming what
    is supported: CUDA tensors on one device of compute capability >= 8.0, dtype bf16/fp16 (all
    equal), 4-D (B, H, T, D) with the same shape for q, k, v, D in {64, 128}, dropout_p in [0, 1),
    and an extension that builds. The first call on a GPU may build the extension (minutes, then
    cached on disk)."""
    reason = tensor_reason(q, k, v, causal, scale, dropout_p)
    if reason is not None or torch.compiler.is_compiling():
        return reason  # the environment was checked when the model ran eagerly / was planned
    return environment_reason(q.device)


def unsupported_reason(device: torch.device, dtype: torch.dtype, head_dim: int) -> str | None:
    """Why tk attention cannot run on (B, H, T, head_dim) inputs of this device and dtype, or None
    if it can: the check tk_kernels/dispatch.py makes once per plan. May build the extension."""
    if device.type != "cuda":
        return f"no CUDA GPU (tensors are on {device.type}); the TK kernels need an NVIDIA GPU"
    if not torch.cuda.is_available():
        return "no usable CUDA GPU (torch.cuda.is_available() is False)"
    if dtype not in SUPPORTED_DTYPES:
        return f"tk attention supports dtypes bfloat16 and float16, got {dtype}"
    if head_dim not in SUPPORTED_HEAD_DIMS:
        return f"tk attention supports head dim D in {SUPPORTED_HEAD_DIMS}, got D={head_dim}"
    return environment_reason(device)


def unavailable_reason() -> str | None:
    """None if the tk kernels can run on the current CUDA device, else why not."""
    if not torch.cuda.is_available():
        return "tk attention needs a CUDA GPU; torch.cuda.is_available() is False"
    return environment_reason(torch.device("cuda", torch.cuda.current_device()))


def is_available() -> bool:
    """True if the tk kernels can run on the current CUDA device (builds the extension if needed)."""
    return unavailable_reason() is None


# -----------------------------------------------------------------------------
# public API

def attention_op(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, scale: float | None = None,
                 dropout_p: float = 0.0) -> Tensor:
    """The kernel without argument checks, for callers that checked already (tk_kernels.dispatch,
    whose plan checked device, dtype and head dim, and which checks the shapes per call)."""
    if scale is None:
        scale = 1.0 / math.sqrt(q.shape[-1])
    if torch.compiler.is_compiling():
        o, _, _ = torch.ops.tk.attention_fwd(q, k, v, causal, float(scale), float(dropout_p))
    else:
        o, _, _ = _EagerAttention.apply(q, k, v, causal, float(scale), float(dropout_p))
    return o


def attention_qkv_op(qkv: Tensor, n_head: int, causal: bool = True, scale: float | None = None,
                     dropout_p: float = 0.0, bias: Tensor | None = None) -> Tensor:
    """attention_op on the (B, H, T, D) q, k, v views of a fused (B, T, 3 * n_head * D) projection qkv (qkv_views),
    without argument checks beyond qkv's shape: the (B, H, T, D) output, and in the backward the gradient of qkv
    as one contiguous (B, T, 3 * n_head * D) tensor that the kernels write through its three views (no
    concatenation of dq, dk, dv). bias: the projection's bias, already added into qkv, whose gradient the
    backward then returns (attention_qkv)."""
    if scale is None:
        scale = 1.0 / math.sqrt(qkv.shape[-1] // (3 * n_head))
    if torch.compiler.is_compiling():
        o, _, _ = torch.ops.tk.attention_qkv_fwd(qkv, n_head, causal, float(scale), float(dropout_p), bias)
    else:
        o, _, _ = _EagerAttentionQKV.apply(qkv, n_head, causal, float(scale), float(dropout_p), bias)
    return o


def attention_qkv(qkv: Tensor, n_head: int, causal: bool = True, scale: float | None = None,
                  dropout_p: float = 0.0, bias: Tensor | None = None) -> Tensor:
    """attention(q, k, v, causal, scale, dropout_p) of the q, k, v views of a fused (B, T, 3 * n_head * D)
    projection (model.py's c_attn output), with qkv's gradient written in place of a concatenation.
    bias: the (3 * n_head * D,) bias of that projection, which qkv already includes and whose gradient the
    projection's backward was told not to compute (dispatch.linear(bias_grad=False)): the forward does not read it;
    the backward returns its gradient, the sums of qkv's gradient over batch and tokens (the key third exactly 0),
    which the Hopper backward takes from its row passes without dropout (csrc/qkv_bias_grad.cuh).
    Raises ValueError (naming what is supported) for inputs the kernels cannot handle."""
    if not isinstance(qkv, Tensor):
        raise ValueError(f"tk attention: qkv must be a torch.Tensor, got {type(qkv).__name__}")
    reason = qkv_shape_reason(qkv, n_head) or qkv_bias_reason(qkv, bias)
    if reason is None:
        reason = check_supported(*qkv_views(qkv, n_head), causal, scale, dropout_p)
    if reason is not None:
        raise ValueError(reason)
    return attention_qkv_op(qkv, n_head, causal, scale, dropout_p, bias)


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = True, scale: float | None = None,
              dropout_p: float = 0.0) -> Tensor:
    """softmax(q @ k^T * scale [+ causal mask]) @ v, with dropout of probability dropout_p on the
    softmax, like F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=causal,
    scale=scale), for (B, H, T, D) bf16/fp16 CUDA tensors with D in {64, 128}. scale defaults to
    1/sqrt(D). dropout_p applies whenever it is > 0 (pass 0.0 in eval, as model.py does).
    Raises ValueError (naming what is supported) for inputs the kernels cannot handle."""
    reason = check_supported(q, k, v, causal, scale, dropout_p)
    if reason is not None:
        raise ValueError(reason)
    return attention_op(q, k, v, causal, scale, dropout_p)
