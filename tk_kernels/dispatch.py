"""
One switch between our CUDA kernels and the PyTorch reference ops.

model.py calls the three op families through here with the model's `kernels` setting:

    torch  PyTorch reference ops (tk_kernels/reference.py; SDPA for attention).
    tk     our TK kernel; if it cannot run on these inputs (no GPU, arch, dtype,
           head dim, dropout while training, build failure, ...) raise
           TKUnsupportedError saying why.
    auto   our TK kernel where it can run, else the reference op, with a
           one-time warning per distinct reason.

Attention is the only family with a TK kernel so far; MLP and LayerNorm run
the reference op in every mode (describe() says so).

The decision depends only on tensor metadata (device, dtype, head dim, causal,
dropout on/off, equal shapes, last-dim stride) and is cached per key. The
cached lookup is marked torch.compiler.assume_constant_result (on first use of
tk/auto), so under torch.compile it is evaluated once while tracing and leaves
no graph break.

Queries: which(op, ..., kernels=...) -> "tk" | "torch";
unsupported_reason(op, ...) -> None | str; describe(kernels, ...) -> str.
"""

import importlib
import operator
import warnings

import torch

from . import reference

KERNEL_MODES = ("torch", "tk", "auto")
OPS = ("attention", "mlp", "layer_norm")
TK_OPS = ("attention",)  # op families that have a TK kernel today


class TKUnsupportedError(ValueError):
    """kernels='tk' was asked for but our kernel cannot run on these inputs."""


def check_mode(kernels: str) -> str:
    """Validate a kernels setting. For 'tk'/'auto' this also readies the
    dispatch for torch.compile (see _mark_constant); GPT() calls it."""
    if kernels not in KERNEL_MODES:
        raise ValueError(f"kernels must be one of {', '.join(KERNEL_MODES)}; got {kernels!r}")
    if kernels != "torch":
        _mark_constant()
    return kernels


# ---------------------------------------------------------------------------
# the decision

_reason_cache: dict[tuple, str | None] = {}
_warned: set[str] = set()


def reset() -> None:
    """Forget cached decisions and issued warnings (for tests)."""
    _reason_cache.clear()
    _warned.clear()


_tk_attention = None  # tk_kernels.attention.attention once _tk_attention_reason has imported it


def _tk_attention_reason(device_type: str, device_index: int | None, dtype: torch.dtype,
                         head_dim: int, causal: bool) -> str | None:
    """Why our attention kernel cannot run on (B, H, T, head_dim) inputs of this
    device and dtype, or None if it can. Asks tk_kernels/attention.py."""
    if device_type != "cuda":
        return f"no CUDA GPU (tensors are on {device_type}); the TK kernels need an NVIDIA GPU"
    if not torch.cuda.is_available():
        return "no usable CUDA GPU (torch.cuda.is_available() is False)"
    global _tk_attention
    try:
        tk_attention = importlib.import_module(__package__ + ".attention")
    except Exception as e:  # missing module, broken install, ...
        return f"cannot import tk_kernels.attention ({type(e).__name__}: {e})"
    _tk_attention = tk_attention.attention
    device = torch.device(device_type, device_index)
    try:
        # a tiny probe with the same device, dtype and head dim: T >= 1 is always allowed
        probe = torch.empty(1, 1, 1, head_dim, device=device, dtype=dtype)
        reason = tk_attention.check_supported(probe, probe, probe, causal=causal)
        # while torch.compile traces, check_supported skips its GPU/build checks:
        # ask for them explicitly (cached in tk_kernels.attention)
        if reason is None and torch.compiler.is_compiling() and \
                hasattr(tk_attention, "unavailable_reason") and \
                device.index in (None, torch.cuda.current_device()):
            reason = tk_attention.unavailable_reason()
        return reason
    except Exception as e:
        return f"{type(e).__name__}: {e}"


def _decide(op: str, kernels: str, device_type: str, device_index: int | None,
            dtype: torch.dtype, head_dim: int, causal: bool, dropout: bool,
            same_shape: bool, last_dim_contiguous: bool, warn: bool) -> str:
    """Return "tk", "torch", or "error: <reason>" (kernels='tk' and unsupported)."""
    check_mode(kernels)
    if kernels == "torch" or op not in TK_OPS:
        return "torch"
    if dropout:
        reason = ("attention dropout > 0 while training (the TK attention kernel has no "
                  "dropout; set dropout=0.0, or evaluate with model.eval())")
    elif not same_shape:
        reason = ("q, k and v differ in shape (the TK attention kernel needs equal "
                  "(B, H, T, D) shapes, e.g. no KV-cache decoding)")
    elif not last_dim_contiguous:
        reason = "the last dimension of q, k or v is not contiguous (stride != 1)"
    else:
        key = (op, device_type, device_index, dtype, head_dim, causal)
        if key not in _reason_cache:
            _reason_cache[key] = _tk_attention_reason(device_type, device_index, dtype,
                                                      head_dim, causal)
        reason = _reason_cache[key]
    if reason is None:
        return "tk"
    if kernels == "tk":
        return "error: " + reason
    if warn and reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"kernels=auto: {op} falls back to PyTorch: {reason}", stacklevel=3)
    return "torch"


_marked = False


def _mark_constant() -> None:
    """Mark _decide with torch.compiler.assume_constant_result, so that Dynamo
    calls it once while tracing and bakes in its result (no graph break).
    Done on first use of a non-torch mode rather than at import, because the
    decorator imports torch._dynamo (seconds), which kernels=torch never needs."""
    global _marked
    if not _marked:
        torch.compiler.assume_constant_result(_decide)
        _marked = True


def _tk_error(op: str, decision: str) -> TKUnsupportedError:
    return TKUnsupportedError(
        f"kernels=tk: the TK {op} kernel cannot run here: {decision[len('error: '):]}. "
        "Use kernels=auto to fall back to PyTorch where needed, or kernels=torch.")


# ---------------------------------------------------------------------------
# the ops

def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *, causal: bool = True,
              dropout_p: float = 0.0, scale: float | None = None,
              kernels: str = "torch") -> torch.Tensor:
    """Scaled dot-product attention on (B, H, T, D) tensors, like
    F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=causal, scale=scale)."""
    if kernels == "torch":
        return reference.attention(q, k, v, causal, dropout_p, scale)
    # Under torch.compile sizes and floats may be symbolic, but assume_constant_result
    # needs constants: operator.index() and the `True if ... else False` branches make
    # Dynamo specialize them (with guards).
    decision = _decide("attention", kernels, q.device.type, q.device.index, q.dtype,
                       operator.index(q.shape[-1]),
                       True if causal else False,
                       True if dropout_p > 0.0 else False,
                       True if q.shape == k.shape and q.shape == v.shape else False,
                       True if q.stride(-1) == 1 and k.stride(-1) == 1 and v.stride(-1) == 1 else False,
                       True)
    if decision == "tk":
        # bound by _tk_attention_reason, which ran before any "tk" decision; an import
        # statement here would break Dynamo's graph (its result is a function, not a module)
        return _tk_attention(q, k, v, causal=causal, scale=scale)
    if decision != "torch":
        raise _tk_error("attention", decision)
    return reference.attention(q, k, v, causal, dropout_p, scale)


def mlp(x: torch.Tensor, fc_weight: torch.Tensor, fc_bias: torch.Tensor | None,
        proj_weight: torch.Tensor, proj_bias: torch.Tensor | None, *,
        kernels: str = "torch") -> torch.Tensor:
    """proj(gelu(fc(x))). No TK kernel yet: the reference op in every mode."""
    return reference.mlp(x, fc_weight, fc_bias, proj_weight, proj_bias)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               eps: float = 1e-5, *, kernels: str = "torch") -> torch.Tensor:
    """LayerNorm over the last dim. No TK kernel yet: the reference op in every mode."""
    return reference.layer_norm(x, weight, bias, eps)


# ---------------------------------------------------------------------------
# queries

def _metadata(tensors, device, dtype, head_dim):
    if tensors:
        q = tensors[0]
        return q.device, q.dtype, q.shape[-1]
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    if device.type == "cuda" and device.index is None and torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
    return device, dtype or torch.float32, head_dim if head_dim is not None else 64


def _query(op, tensors, kernels, device, dtype, head_dim, causal, dropout_p):
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; ops are {', '.join(OPS)}")
    check_mode(kernels)
    device, dtype, head_dim = _metadata(tensors, device, dtype, head_dim)
    same = all(t.shape == tensors[0].shape for t in tensors)
    contiguous = all(t.stride(-1) == 1 for t in tensors)
    return _decide(op, kernels, device.type, device.index, dtype, head_dim, causal,
                   dropout_p > 0.0, same, contiguous, False)


def unsupported_reason(op: str, *tensors: torch.Tensor, device=None, dtype=None,
                       head_dim: int | None = None, causal: bool = True,
                       dropout_p: float = 0.0) -> str | None:
    """Why the TK kernel for op cannot run on these tensors (or on tensors of this
    device/dtype/head_dim), or None if it can. Never raises for unsupported inputs."""
    if op not in TK_OPS:
        _query(op, tensors, "torch", device, dtype, head_dim, causal, dropout_p)
        return f"no TK {op} kernel yet"
    decision = _query(op, tensors, "tk", device, dtype, head_dim, causal, dropout_p)
    return None if decision == "tk" else decision[len("error: "):]


def which(op: str, *tensors: torch.Tensor, kernels: str, device=None, dtype=None,
          head_dim: int | None = None, causal: bool = True, dropout_p: float = 0.0) -> str:
    """Which implementation ("tk" or "torch") a call of op would run. Pass the
    call's tensors, or describe them by device/dtype/head_dim (defaults: the
    current CUDA device if any else cpu, float32, 64). With kernels='tk' and
    inputs the kernel cannot take, raises TKUnsupportedError like the call would."""
    decision = _query(op, tensors, kernels, device, dtype, head_dim, causal, dropout_p)
    if decision.startswith("error: "):
        raise _tk_error(op, decision)
    return decision


def describe(kernels: str, *, device=None, dtype=None, head_dim: int | None = None,
             causal: bool = True, dropout_p: float = 0.0) -> str:
    """One line saying which path each op family takes, e.g.
    'kernels=auto: attention=torch (TK unsupported: no CUDA GPU ...); mlp=torch (no TK kernel yet); ...'.
    With only `kernels` it describes the rule; with device/dtype/head_dim (or
    their defaults) it resolves it for such tensors. dropout_p > 0 describes
    training and evaluation separately."""
    check_mode(kernels)
    parts = []
    for op in OPS:
        if kernels == "torch":
            parts.append(f"{op}=torch" + (" (SDPA)" if op == "attention" else ""))
            continue
        if op not in TK_OPS:
            parts.append(f"{op}=torch (no TK kernel yet)")
            continue
        kw = dict(device=device, dtype=dtype, head_dim=head_dim, causal=causal)
        reason = unsupported_reason(op, dropout_p=0.0, **kw)
        train_reason = unsupported_reason(op, dropout_p=dropout_p, **kw) if dropout_p > 0.0 else None
        fallback = "torch" if kernels == "auto" else "ERROR"
        if reason is not None:
            texts = [f"{fallback} (TK unsupported: {reason})"]
        elif train_reason is not None:
            texts = ["tk in eval", f"{fallback} while training (TK unsupported: {train_reason})"]
        else:
            texts = ["tk"]
        parts.append(f"{op}=" + ", ".join(texts))
    return f"kernels={kernels}: " + "; ".join(parts)
