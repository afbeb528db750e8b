"""
One dispatch decision, in plain Python: our TK kernel or the PyTorch reference op.

The `kernels` setting of a model:

    torch  the PyTorch reference ops (tk_kernels/reference.py; SDPA for attention).
    tk     our TK kernel; where it cannot run (no GPU, arch, dtype, head dim, build failure,
           a family whose TK op lacks dropout while training, ...) raise TKUnsupportedError saying why.
    auto   our TK kernel where it can run, else the reference op, with a one-time warning per
           distinct reason.

FAMILIES is the registry: per op family its reference op and, if it has one, its TK op and the
check of which inputs the TK op supports (a reason string when not). Attention, the MLP (Hopper GEMM
with GELU fused into its epilogues), LayerNorm (fused with the residual add) and the classifier
(lm_head + cross-entropy) have TK kernels.

The decision is made in two parts:

    plan = dispatch.plan(kernels, device, dtype, head_dim=64, dropout_p=0.1)
        once per model (GPT.plan_kernels: at the first forward, or explicitly before
        torch.compile). Runs the GPU checks (capability, shared memory, extension build, dtype,
        head dim), raises TKUnsupportedError for kernels=tk, warns for kernels=auto. A Plan is a
        frozen value: torch.compile guards on it and traces no check again.
    dispatch.attention(plan, q, k, v, causal=True, dropout_p=0.0)
    dispatch.attention_qkv(plan, qkv, n_head, causal=True, dropout_p=0.0)
        the same on the q, k, v views of a fused (B, T, 3C) projection (model.py): on the TK path its
        gradient is written straight into one (B, T, 3C) tensor
    dispatch.add_layer_norm(plan, x, delta, weight, bias, dropout_p=0.0) / dispatch.layer_norm(plan, x, weight, bias)
        per call: what varies per call (dropout while training, q and k of different shapes)
        is plain Python on Python numbers and tensor metadata, which torch.compile folds into
        the graph without a break. add_layer_norm's dropout_p is the residual dropout of delta
        (x + dropout(delta)), applied inside the TK kernel.
    dispatch.linear_cross_entropy(plan, x, weight, targets, ignore_index=-1)
        per call, the same way: the loss of the lm_head, without keeping all logits on the TK path.
    dispatch.mlp(plan, x, w_fc, b_fc, w_proj, b_proj, training=True)
        per call: c_proj(gelu(c_fc(x))) of the transformer block (the TK MLP runs only while training).
    dispatch.linear(plan, layer, x, training=True)
        per call: an nn.Linear layer (the attention's c_attn and c_proj) on the MLP's GEMM, under the MLP's choice.
    optimizer = dispatch.adamw(kernels, param_groups, lr, betas)
    dispatch.clip_grad_norm_(optimizer, parameters, max_norm)
        the training's optimizer (tk_kernels.AdamW or torch's fused AdamW; the family OPTIMIZER), made once,
        outside any plan; and gradient clipping, which tk_kernels.AdamW folds into its next step().

describe(...) / Plan.describe() say per family which path runs and why (train.py prints it).
The environment variable TK_TORCH_FAMILIES=name[,name...] (e.g. classifier,layer_norm) keeps those
families on PyTorch under kernels=tk and auto: to find which family a difference comes from.
override(family, ...) swaps a registry entry inside a `with` block (tests, kernel experiments).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
from dataclasses import dataclass
from typing import Callable

import torch

from . import reference
from .families.attention import ops as attention_ops
from .families.classifier import ops as classifier_ops
from .families.layernorm import ops as layernorm_ops
from .families.mlp import ops as mlp_ops
from .families.optim import ops as optim_ops

KERNEL_MODES = ("torch", "tk", "auto")


class TKUnsupportedError(ValueError):
    """kernels='tk' was asked for but our kernel cannot run on these inputs."""


@dataclass(frozen=True)
class Family:
    """One op family in the registry."""
    name: str
    reference: Callable                # the PyTorch op (tk_kernels/reference.py)
    tk: Callable | None = None         # our kernel's op; None: no TK kernel yet
    # why the TK op cannot run on inputs of this device and dtype for a model of these dims
    # ({"head_dim": ..., "n_embd": ..., "vocab_size": ...}; None if it can); called once per
    # plan, may query the GPU and build the extension
    unsupported: Callable[[torch.device, torch.dtype, dict], str | None] | None = None
    # the family applies dropout while training and its TK op has none (or its dropout is not
    # enabled yet): training with dropout_p > 0 runs the reference op
    has_dropout: bool = False
    # why the model does not use this TK kernel yet although it runs (it measured slower than the
    # PyTorch op it replaces); None: used wherever it is supported
    not_used: str | None = None
    # (device) -> why the model does not use this TK kernel on that GPU, or None: GPUs the family has no TK
    # kernel for (the MLP's GEMM is Hopper-only), where the model runs the PyTorch op under kernels=tk too,
    # without an error, as it does for a family whose TK kernel is not used
    not_used_on: Callable[[torch.device], str | None] | None = None
    # True: the TK op runs only while training (the module's .training; eval, sampling included, runs the
    # reference): the MLP's forward writes gelu'(pre) for its backward and casts the fp32 weights
    # per call, where autocast caches F.linear's casts, so only the train step was measured faster
    train_only: bool = False
    # attention only: the TK op on the fused (B, T, 3C) projection, (qkv, n_head, causal, scale, dropout_p)
    # -> (B, H, T, D), whose backward writes qkv's gradient in place of a concatenation; None: attention_qkv
    # hands the q, k, v views to `tk`
    tk_qkv: Callable | None = None
    # mlp only: the TK op of one linear layer on the MLP's GEMM, (x, weight, bias) -> x weight^T + bias, which the
    # model's attention projections (c_attn, c_proj) run under the MLP's choice (dispatch.linear); None: the layer
    tk_linear: Callable | None = None


FAMILIES: dict[str, Family] = {
    # the TK attention applies dropout itself (tk_kernels.attention(..., dropout_p), both kernel paths), so
    # has_dropout stays False and the model trains on it with dropout > 0; its dropout overhead and the
    # shakespeare_char runs with it are in bench/RESULTS.md (sessions 3 and 5)
    "attention": Family("attention", reference.attention, attention_ops.attention_op,
                        lambda device, dtype, dims: attention_ops.unsupported_reason(
                            device, dtype, dims["head_dim"]),
                        tk_qkv=attention_ops.attention_qkv_op),
    # tk and reference: (x, w_fc, b_fc, w_proj, b_proj) -> c_proj(gelu(c_fc(x)))
    # Train-only, and Hopper-only: on other GPUs the model's MLP is PyTorch's (not_used_on), kernels=tk included.
    # Used since session 15: with its weight gradients on cuBLAS, one process, family off / on alternated, CUDA
    # graphs, H200: GPT-2 124M 32.20, 32.33 / 31.42, 31.71 ms a step; GPT-2 medium 83.58 / 82.92; shakespeare_char
    # (dropout 0.2) 4.57 / 4.48. Its loss parity against the family off: 0.55% / 0.35% (bench/RESULTS.md, session 15).
    # The attention's projections run on the same GEMM under the same choice (tk_linear, dispatch.linear; fp32
    # weight gradients from cuBLAS, column-sum bias gradients) since session 25: A/B/A/B against cuBLAS's
    # projections, GPT-2 30.72 / 30.64 vs 30.86 / 30.78 ms a step (H200), GPT-2 medium 82.99 / 82.95 vs 83.23 /
    # 83.15 (H100); the same op with cuBLAS's GEMMs measured no gain at GPT-2 (bench/RESULTS.md, session 25).
    "mlp": Family("mlp", reference.mlp, mlp_ops.mlp_op, mlp_ops.unsupported_reason,
                  not_used_on=mlp_ops.not_used_on, train_only=True, tk_linear=mlp_ops.linear_op),
    # tk and reference: (x, delta | None, weight, bias, eps[, out_dtype][, dropout_p]) -> (x + delta, LayerNorm(x +
    # delta)), with dropout_p > 0 x + dropout(delta). The TK op applies the residual dropout itself (in its forward
    # kernel, the mask regenerated in the backward), so has_dropout stays False and the model trains on it with
    # dropout > 0: Block.forward_fused hands it the sublayer output before dropout
    "layer_norm": Family("layer_norm", reference.add_layer_norm, layernorm_ops.add_layer_norm_op,
                         layernorm_ops.unsupported_reason),
    "classifier": Family("classifier", reference.linear_cross_entropy,
                         classifier_ops.linear_cross_entropy_op, classifier_ops.unsupported_reason),
}

# The optimizer is a family of its own outside the model's plan (no forward op; made once by adamw() below):
# tk and reference: (param_groups, lr, betas, eps, weight_decay) -> tk_kernels.AdamW / torch.optim.AdamW (fused).
# TK_TORCH_FAMILIES=optimizer keeps torch's.
OPTIMIZER = Family("optimizer", reference.adamw, optim_ops.AdamW, optim_ops.unsupported_reason)


def check_mode(kernels: str) -> str:
    """kernels itself if it is one of KERNEL_MODES, else ValueError."""
    if kernels not in KERNEL_MODES:
        raise ValueError(f"kernels must be one of {', '.join(KERNEL_MODES)}; got {kernels!r}")
    return kernels


@contextlib.contextmanager
def override(family: str, **fields):
    """Within the block, the registry entry of `family` has these fields replaced, e.g.
    override("attention", tk=my_kernel, unsupported=lambda device, dtype, dims: None).
    Plans made inside the block use the replaced entry (and keep it afterwards). Replacing `tk` also
    drops attention's fused-projection op (tk_qkv) and the MLP's linear op (tk_linear) unless they are given
    too: the model's attention_qkv calls then reach the replacement with the q, k, v views, and its
    projections run their nn.Linear layers."""
    if family not in FAMILIES:
        raise ValueError(f"unknown op family {family!r}; families are {', '.join(FAMILIES)}")
    saved = FAMILIES[family]
    for extra in ("tk_qkv", "tk_linear"):
        if "tk" in fields and extra not in fields:
            fields[extra] = None
    FAMILIES[family] = dataclasses.replace(saved, **fields)
    try:
        yield FAMILIES[family]
    finally:
        FAMILIES[family] = saved


# ---------------------------------------------------------------------------
# the plan: once per model

@dataclass(frozen=True)
class Choice:
    """What one family runs under a plan."""
    family: Family
    tk: bool                          # True: the TK op runs (in eval, or always without dropout)
    reason: str | None = None         # why the TK op does not run (kernels=torch: None)
    train_tk: bool = False            # True: the TK op runs while training with the plan's dropout
    train_reason: str | None = None   # why it does not then
    forced_torch: bool = False        # kept on PyTorch by TK_TORCH_FAMILIES
    not_used: str | None = None       # why the model keeps it on PyTorch although it may run (Family.not_used*)


@dataclass(frozen=True)
class Plan:
    """Which implementation each family runs for one model's inputs (see plan())."""
    kernels: str
    device: torch.device
    dtype: torch.dtype
    head_dim: int
    dropout_p: float
    choices: dict[str, Choice]

    def matches(self, device: torch.device, dtype: torch.dtype) -> bool:
        """Whether this plan was made for inputs of this device and dtype."""
        return self.device == device and self.dtype == dtype

    def path(self, family: str, training: bool = False) -> str:
        """"tk" or "torch": what `family` runs in eval (or while training with the plan's dropout)."""
        choice = self.choices[family]
        return "tk" if (choice.train_tk if training else choice.tk) else "torch"

    def reasons(self) -> list[str]:
        """The distinct reasons why TK ops do not run under this plan."""
        out = []
        for c in self.choices.values():
            for r in (c.reason, c.train_reason):
                if r is not None and c.family.tk is not None and r not in out:
                    out.append(r)
        return out

    def describe(self) -> str:
        """One line per plan, e.g. 'kernels=auto: attention=torch (TK unsupported: no CUDA GPU
        ...); mlp=torch (TK kernel not used yet: not faster than cuBLAS ...); layer_norm=torch (TK
        unsupported: same as attention); classifier=torch (TK unsupported: same as attention)' (a
        plan for the CPU): each distinct reason is stated once."""
        parts = []
        fallback = "torch" if self.kernels == "auto" else "ERROR"
        first: dict[str, str] = {}  # reason -> the family that stated it (a reason is stated once)

        def why(name: str, reason: str) -> str:
            if reason in first:
                return f"TK unsupported: same as {first[reason]}"
            first[reason] = name
            return f"TK unsupported: {reason}"

        for name, c in self.choices.items():
            if self.kernels == "torch":
                text = "torch" + (" (SDPA)" if name == "attention" else "")
            elif c.family.tk is None:
                text = "torch (no TK kernel yet)"
            elif c.forced_torch:
                text = "torch (TK_TORCH_FAMILIES)"
            elif c.not_used is not None:
                text = f"torch (TK kernel not used{' yet' if c.family.not_used else ''}: {c.not_used})"
            elif not c.tk and c.reason is None and c.train_tk:
                text = "tk while training, torch in eval"
            elif not c.tk:
                text = f"{fallback} ({why(name, c.reason)})"
            elif not c.train_tk:
                text = f"tk in eval, {fallback} while training ({why(name, c.train_reason)})"
            else:
                text = "tk"
            parts.append(f"{name}={text}")
        return f"kernels={self.kernels}: " + "; ".join(parts)


def normalize_device(device) -> torch.device:
    """torch.device(device), with the current CUDA device filled in for a bare 'cuda'."""
    device = torch.device(device)
    if device.type == "cuda" and device.index is None and torch.cuda.is_available():
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def _dropout_reason(family: str) -> str:
    return (f"{family} dropout > 0 while training (the TK {family} kernel's dropout is not "
            "enabled; set dropout=0.0, or evaluate with model.eval())")


def torch_families() -> set[str]:
    """The families TK_TORCH_FAMILIES keeps on PyTorch; TKUnsupportedError naming the valid ones for a typo."""
    names = {n.strip() for n in os.environ.get("TK_TORCH_FAMILIES", "").split(",") if n.strip()}
    valid = (*FAMILIES, OPTIMIZER.name)
    unknown = sorted(names - set(valid))
    if unknown:
        raise TKUnsupportedError(f"TK_TORCH_FAMILIES: unknown famil{'y' if len(unknown) == 1 else 'ies'} "
                                 f"{', '.join(unknown)}; the families are {', '.join(valid)}")
    return names


def _choice(family: Family, kernels: str, device, dtype, dims: dict, dropout_p,
            forced: set[str] = frozenset()) -> Choice:
    if kernels != "torch" and family.tk is not None and family.name in forced:
        return Choice(family, False, None, False, None, forced_torch=True)
    if kernels != "torch" and family.tk is not None:
        note = family.not_used
        if note is None and family.not_used_on is not None:
            try:
                note = family.not_used_on(device)
            except Exception:  # no usable GPU to ask: unsupported() below states it
                note = None
        if note is not None:
            return Choice(family, False, None, False, None, not_used=note)
    if kernels == "torch" or family.tk is None:
        reason = None if kernels == "torch" else f"no TK {family.name} kernel yet"
        return Choice(family, False, reason, False, reason)
    try:
        reason = family.unsupported(device, dtype, dims)
    except Exception as e:  # a broken install, an unexpected driver error, ...: say so, don't crash
        reason = f"checking the TK {family.name} kernel failed ({type(e).__name__}: {e})"
    train_reason = reason
    if reason is None and dropout_p > 0.0 and family.has_dropout:
        train_reason = _dropout_reason(family.name)
    if reason is None and family.train_only:
        return Choice(family, False, None, train_reason is None, train_reason)
    return Choice(family, reason is None, reason, train_reason is None, train_reason)


def _resolve(kernels, device, dtype, head_dim, dropout_p, dims=None) -> Plan:
    check_mode(kernels)
    device = normalize_device(device)
    dims = {"head_dim": int(head_dim), **(dims or {})}
    forced = torch_families()
    choices = {name: _choice(f, kernels, device, dtype, dims, dropout_p, forced)
               for name, f in FAMILIES.items()}
    return Plan(kernels, device, dtype, int(head_dim), float(dropout_p), choices)


def _tk_error(family: str, reason: str) -> TKUnsupportedError:
    return TKUnsupportedError(
        f"kernels=tk: the TK {family} kernel cannot run here: {reason}. "
        "Use kernels=auto to fall back to PyTorch where needed, or kernels=torch.")


_warned: set[str] = set()  # reasons already warned about (kernels=auto warns once per reason)


def _warn_once(family: str, reason: str) -> None:
    if reason not in _warned:
        _warned.add(reason)
        warnings.warn(f"kernels=auto: {family} falls back to PyTorch: {reason}", stacklevel=3)


def plan(kernels: str, device, dtype: torch.dtype, head_dim: int, dropout_p: float = 0.0,
         warn: bool = True, **dims: int) -> Plan:
    """Decide, for inputs of this device and dtype with head dim head_dim (and dropout dropout_p while
    training: the model's attention and residual dropout), which implementation each family runs. Runs the GPU checks
    (and may build the extension). kernels=tk: TKUnsupportedError if a TK op cannot run (also
    while training with dropout_p > 0). kernels=auto: a one-time warning per distinct reason
    (warn=False: none, e.g. when the caller prints plan.describe() instead). Other model dims
    that a family's support check needs come as keywords (n_embd=..., vocab_size=...)."""
    p = _resolve(kernels, device, dtype, head_dim, dropout_p, dims)
    for name, c in p.choices.items():
        if c.family.tk is None or kernels == "torch":
            continue
        for reason in dict.fromkeys(r for r in (c.reason, c.train_reason) if r is not None):
            if kernels == "tk":
                raise _tk_error(name, reason)
            if warn:
                _warn_once(name, reason)
            else:
                _warned.add(reason)  # the caller reports it
    return p


def describe(kernels: str, *, device=None, dtype: torch.dtype | None = None,
             head_dim: int | None = None, dropout_p: float = 0.0) -> str:
    """Plan.describe() of the plan for such inputs (defaults: the current CUDA device if any else
    cpu, float32, head dim 64), without raising or warning."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return _resolve(kernels, device, dtype or torch.float32,
                    64 if head_dim is None else head_dim, dropout_p).describe()


def reset() -> None:
    """Forget which fallback reasons were warned about (for tests)."""
    _warned.clear()


# ---------------------------------------------------------------------------
# the per-call part: plain Python that torch.compile traces without a break

def _compute_dtype(x: torch.Tensor) -> torch.dtype:
    """The dtype an op on x computes in: the autocast dtype under autocast (as F.linear casts), else x's."""
    device_type = x.device.type
    return torch.get_autocast_dtype(device_type) if torch.is_autocast_enabled(device_type) else x.dtype


def _plan_reason(plan: Plan, device: torch.device, dtype: torch.dtype) -> str | None:
    """Why inputs on `device` computed in `dtype` do not fit the plan, or None."""
    if device != plan.device or dtype != plan.dtype:
        return (f"the plan is for {plan.dtype} on {plan.device}, the inputs are {dtype} on "
                f"{device} (make a plan for them: dispatch.plan or GPT.plan_kernels)")
    return None


def _fall_back(plan: Plan, family: str, reason: str) -> None:
    """The TK op cannot take this call: kernels=tk raises TKUnsupportedError, kernels=auto warns once
    (not while torch.compile traces) and the caller runs the reference op."""
    if plan.kernels == "tk":
        raise _tk_error(family, reason)
    if not torch.compiler.is_compiling():
        _warn_once(family, reason)


def attention(plan: Plan, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, *,
              causal: bool = True, dropout_p: float = 0.0,
              scale: float | None = None) -> torch.Tensor:
    """Scaled dot-product attention on (B, H, T, D) tensors, like
    F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=causal, scale=scale),
    on the implementation the plan chose."""
    choice = plan.choices["attention"]
    if choice.tk:
        if dropout_p > 0.0 and choice.family.has_dropout:
            reason = _dropout_reason("attention")
        elif q.shape != k.shape or q.shape != v.shape:
            reason = (f"q, k and v differ in shape ({tuple(q.shape)}, {tuple(k.shape)}, "
                      f"{tuple(v.shape)}; the TK attention kernel needs equal (B, H, T, D) shapes)")
        else:
            reason = _plan_reason(plan, q.device, q.dtype)
        if reason is None:
            return choice.family.tk(q, k, v, causal, scale, dropout_p)
        _fall_back(plan, "attention", reason)
    return reference.attention(q, k, v, causal, dropout_p, scale)


def qkv_views(qkv: torch.Tensor, n_head: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v: the (B, H, T, D) views of a fused (B, T, 3 * n_head * D) projection (no copies; only the last
    dim is contiguous, which the TK kernels take as it is)."""
    reason = attention_ops.qkv_shape_reason(qkv, n_head)
    if reason is not None:
        raise ValueError(reason)
    return attention_ops.qkv_views(qkv, n_head)


def attention_sums_qkv_bias(plan: Plan, training: bool, dropout_p: float) -> bool:
    """Whether the model should hand its c_attn bias to attention_qkv (qkv_bias) and leave it out of c_attn's
    backward (linear(bias_grad=False)): while training without dropout on the plan's TK attention, whose Hopper
    backward sums that gradient in the row passes it makes anyway (csrc/qkv_bias_grad.cuh) instead of a pass over
    qkv's whole gradient."""
    choice = plan.choices["attention"]
    return training and dropout_p == 0.0 and choice.tk and choice.family.tk_qkv is not None


def attention_qkv(plan: Plan, qkv: torch.Tensor, n_head: int, *, causal: bool = True, dropout_p: float = 0.0,
                  scale: float | None = None, qkv_bias: torch.Tensor | None = None) -> torch.Tensor:
    """attention(plan, q, k, v, ...) of the q, k, v views (qkv_views) of a fused (B, T, 3 * n_head * D)
    projection, the (B, H, T, D) output. The TK path runs the family's fused-projection op, whose backward
    writes qkv's gradient straight into one (B, T, 3C) tensor (no concatenation of dq, dk, dv); the torch
    path and every fallback make the views and call exactly what attention() calls. qkv_bias: the projection's
    bias, already inside qkv, whose gradient the projection's backward does not compute (attention_sums_qkv_bias):
    the TK op returns it; every other path adds qkv_bias - qkv_bias.detach() (zeros) to qkv, through which autograd
    gives it the sums of qkv's gradient."""
    reason = attention_ops.qkv_shape_reason(qkv, n_head) or attention_ops.qkv_bias_reason(qkv, qkv_bias)
    if reason is not None:  # not a fused projection at all: no path can take it
        raise ValueError(reason)
    choice = plan.choices["attention"]
    fused = choice.family.tk_qkv if choice.tk else None
    if fused is not None:
        if dropout_p > 0.0 and choice.family.has_dropout:
            reason = _dropout_reason("attention")
        elif qkv.shape[-1] != 3 * n_head * plan.head_dim:
            reason = (f"qkv of shape {tuple(qkv.shape)} is not a (B, T, 3 * n_head * head_dim) projection of "
                      f"n_head={n_head} heads of the plan's head dim {plan.head_dim}")
        else:
            reason = _plan_reason(plan, qkv.device, qkv.dtype)
        if reason is None:
            return fused(qkv, n_head, causal, scale, dropout_p, qkv_bias)
        _fall_back(plan, "attention", reason)
    if qkv_bias is not None:  # zeros whose gradient is the sums of qkv's
        qkv = qkv + (qkv_bias - qkv_bias.detach()).to(qkv.dtype)
    q, k, v = attention_ops.qkv_views(qkv, n_head)
    if fused is not None:  # fell back
        return reference.attention(q, k, v, causal, dropout_p, scale)
    return attention(plan, q, k, v, causal=causal, dropout_p=dropout_p, scale=scale)


def linear_cross_entropy(plan: Plan, x: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                         ignore_index: int = -1, copy: torch.Tensor | None = None) -> torch.Tensor:
    """Mean cross-entropy of F.linear(x, weight) (x (..., C), weight (V, C)) against targets (...)
    over the targets that are not ignore_index, like reference.linear_cross_entropy, on the
    implementation the plan chose. Under autocast x and weight go to the autocast dtype first, as
    F.linear would cast them (the TK op reads `copy` instead of casting weight when it is weight's copy in that
    dtype: weight_copy); the TK op then never holds more than a chunk of the logits."""
    choice = plan.choices["classifier"]
    if choice.tk:
        dtype = _compute_dtype(x)
        reason = _plan_reason(plan, x.device, dtype)
        if reason is None and (x.shape[-1] != weight.shape[-1] or x.shape[:-1] != targets.shape):
            reason = (f"x {tuple(x.shape)}, weight {tuple(weight.shape)} and targets "
                      f"{tuple(targets.shape)} do not fit (x (..., C), weight (V, C), targets (...))")
        if reason is None:
            x2, t2 = x.reshape(-1, x.shape[-1]).to(dtype), targets.reshape(-1)
            if _usable_copy(copy, weight, dtype) is not None:
                return choice.family.tk(x2, weight, t2, ignore_index, copy)
            return choice.family.tk(x2, weight.to(dtype), t2, ignore_index)
        _fall_back(plan, "classifier", reason)
    return reference.linear_cross_entropy(x, weight, targets, ignore_index)


def _gemm_rows(plan: Plan, x: torch.Tensor, *weights: torch.Tensor) -> tuple[torch.Tensor | None, str | None]:
    """(x as rows (N, K) in the dtype the op computes in, None) for the MLP family's GEMM ops (mlp, linear): under
    autocast x goes to the autocast dtype first, as F.linear would cast it; or (None, why the op cannot take x and
    these (out, in) weights)."""
    dtype = _compute_dtype(x)
    reason = _plan_reason(plan, x.device, dtype)
    if reason is not None:
        return None, reason
    x2 = x.reshape(-1, x.shape[-1]).to(dtype)
    return x2, mlp_ops.tensor_reason(x2, *weights)


def mlp(plan: Plan, x: torch.Tensor, w_fc: torch.Tensor, b_fc: torch.Tensor | None, w_proj: torch.Tensor,
        b_proj: torch.Tensor | None, training: bool = True,
        copies: tuple[torch.Tensor | None, torch.Tensor | None] = (None, None)) -> torch.Tensor:
    """c_proj(gelu(c_fc(x))) for x (..., C) and nn.Linear weights, like reference.mlp, on the
    implementation the plan chose (training: the calling module's .training; the TK MLP is train-only).
    Under autocast x goes to the autocast dtype first, as F.linear would cast it (the TK op casts the
    weights itself, or reads `copies`, the weights' copies in that dtype (weight_copy), and returns the
    weights' gradients in their dtype)."""
    choice = plan.choices["mlp"]
    if choice.train_tk if training else choice.tk:
        x2, reason = _gemm_rows(plan, x, w_fc, w_proj)
        if reason is None:
            c_fc, c_proj = _usable_copy(copies[0], w_fc, x2.dtype), _usable_copy(copies[1], w_proj, x2.dtype)
            copies = {} if c_fc is None and c_proj is None else dict(copy_fc=c_fc, copy_proj=c_proj)
            return choice.family.tk(x2, w_fc, b_fc, w_proj, b_proj, **copies).view(*x.shape[:-1], w_proj.shape[0])
        _fall_back(plan, "mlp", reason)
    return reference.mlp(x, w_fc, b_fc, w_proj, b_proj)


def linear(plan: Plan, layer: torch.nn.Linear, x: torch.Tensor, training: bool = True,
           bias: bool = True, bias_grad: bool = True) -> torch.Tensor:
    """layer(x) for an nn.Linear layer (the attention's projections) and x (..., K). While training with the plan's
    TK MLP (the same GEMM, the same train-only choice: kernels=tk, and kernels=auto where it runs) on the family's
    linear op (tk_linear): x goes to the autocast dtype first, as F.linear would cast it, and the op casts the
    layer's weights itself (saving the cast for its backward) and returns their gradients in their dtype (the
    weight's fp32 out of its GEMM); the module's forward hooks do not run there. Otherwise layer(x) itself, hooks
    and all. Inputs the op cannot take: kernels=tk raises TKUnsupportedError, kernels=auto warns once and calls
    layer(x). bias=False: x W^T without the layer's bias (the caller adds it: Block.forward_fused), on our GEMM
    or as F.linear(x, layer.weight) (no forward hooks). bias_grad=False: the bias is added but gets no gradient
    here (attention_qkv returns c_attn's: attention_sums_qkv_bias), as F.linear(x, layer.weight, bias.detach())."""
    choice = plan.choices["mlp"]
    op = choice.family.tk_linear
    b = layer.bias if bias else None
    if b is not None and not bias_grad:
        b = b.detach()
    if op is not None and (choice.train_tk if training else choice.tk):
        weight = layer.weight
        x2, reason = _gemm_rows(plan, x, weight)
        if reason is None:
            copy = _usable_copy(weight_copy(layer), weight, x2.dtype)
            return (op(x2, weight, b) if copy is None else op(x2, weight, b, copy)).view(*x.shape[:-1], weight.shape[0])
        _fall_back(plan, "mlp", reason)
    return layer(x) if bias and bias_grad else torch.nn.functional.linear(x, layer.weight, b)


# ---------------------------------------------------------------------------
# 16-bit weight copies (GPT.keep_weight16): what the GEMMs read instead of casting the fp32 weights

def weight_copy(layer: torch.nn.Module) -> torch.Tensor | None:
    """layer.weight16, the 16-bit copy of layer.weight that GPT.keep_weight16 keeps, or None if it has none.
    Outside torch.compile it is first checked against the weight's version counter and recast if the weight
    was changed in place since the copy was written (tk_kernels.AdamW writes both without touching the counter;
    any other optimizer's step bumps it and its step hook recasts the copies, refresh_weight_copy); compiled
    code reads it unchecked (train.py changes weights only through the optimizer)."""
    copy = getattr(layer, "weight16", None)
    if copy is not None and not torch.compiler.is_compiling() and layer.weight16_version != layer.weight._version:
        refresh_weight_copy(layer)
    return copy


@torch.no_grad()
def refresh_weight_copy(layer: torch.nn.Module) -> None:
    """layer.weight16 <- layer.weight rounded to the copy's dtype, and the weight's version noted."""
    layer.weight16.copy_(layer.weight)
    layer.weight16_version = layer.weight._version


def _usable_copy(copy: torch.Tensor | None, weight: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
    """copy if it can stand in for weight cast to dtype (its dtype and shape), else None (cast weight)."""
    if copy is None or copy.dtype != dtype or copy.shape != weight.shape or weight.dtype == dtype:
        return None
    return copy


def add_layer_norm(plan: Plan, x: torch.Tensor, delta: torch.Tensor | None, weight: torch.Tensor,
                   bias: torch.Tensor | None, eps: float = 1e-5, *, dropout_p: float = 0.0,
                   delta_bias: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(s, y): s = x + delta (x itself if delta is None), y = LayerNorm(s) over the last dim, on the
    implementation the plan chose. The reference is exactly `s = x + delta; F.layer_norm(s, ...)`;
    the TK kernel computes the same s and returns y in the plan's dtype (under autocast the
    autocast dtype, which the next GEMM reads as is, where F.layer_norm returns float32).
    dropout_p > 0 (training; pass 0.0 in eval): s = x + F.dropout(delta, dropout_p), the residual
    dropout of the sublayer whose output delta is, inside the TK kernel (its mask drawn from PyTorch's
    CUDA generator) or as F.dropout on the reference path; with delta None there is nothing to drop.
    dropout_p == 0 calls exactly what the op without dropout calls. delta_bias (with a delta; the bias of
    the Linear whose output delta is, left out there): delta + delta_bias in delta's dtype in delta's
    place, its gradient from the TK backward kernel's column sums."""
    choice = plan.choices["layer_norm"]
    drop = delta is not None and dropout_p > 0.0
    if choice.tk:
        if x.device != plan.device:
            reason = (f"the plan is for {plan.device}, the inputs are on {x.device} (make a plan for "
                      "them: dispatch.plan or GPT.plan_kernels)")
        else:
            reason = layernorm_ops.tensor_reason(x, delta, weight, bias, plan.dtype, delta_bias)
            if reason is None and drop:
                reason = layernorm_ops.dropout_reason(dropout_p)
        if reason is None:
            kw = {} if delta_bias is None else {"delta_bias": delta_bias}
            if drop:
                return choice.family.tk(x, delta, weight, bias, eps, plan.dtype, dropout_p, **kw)
            return choice.family.tk(x, delta, weight, bias, eps, plan.dtype, **kw)
        _fall_back(plan, "layer_norm", reason)
    # (drops only with a delta and p > 0)
    return reference.add_layer_norm(x, delta, weight, bias, eps, dropout_p, delta_bias=delta_bias)


def layer_norm(plan: Plan, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm of x over its last dim, on the implementation the plan chose (see add_layer_norm)."""
    return add_layer_norm(plan, x, None, weight, bias, eps)[1]


# ---------------------------------------------------------------------------
# the optimizer: made once per training run, from the kernels setting alone (no plan needed)

def adamw(kernels: str, param_groups, lr: float, betas: tuple[float, float], eps: float = 1e-8,
          weight_decay: float = 1e-2) -> torch.optim.Optimizer:
    """The training's AdamW for these parameter groups: tk_kernels.AdamW (its step and the gradient clipping in
    one pass over all parameters, csrc/adamw.cu) or torch.optim.AdamW (fused on CUDA), as `kernels` says.
    kernels=tk raises TKUnsupportedError where ours cannot run (no GPU, parameters that are not fp32 CUDA
    tensors on one device, ...); kernels=auto warns once and returns torch's. weight_decay is the default of
    groups that do not set their own."""
    check_mode(kernels)
    groups = reference.as_param_groups(param_groups)  # read here, then handed on (an iterator is read once)
    params = [p for g in groups for p in g["params"]]
    device = normalize_device(params[0].device if params else "cpu")
    choice = _choice(OPTIMIZER, kernels, device, torch.float32, {}, 0.0, torch_families())
    reason = choice.reason
    if choice.tk:
        reason = optim_ops.params_reason(groups)
        if reason is None:
            return OPTIMIZER.tk(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    if reason is not None and kernels != "torch":
        if kernels == "tk":
            raise _tk_error("optimizer", reason)
        _warn_once("optimizer", reason)
    return OPTIMIZER.reference(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)


def clip_grad_norm_(optimizer: torch.optim.Optimizer, parameters, max_norm: float) -> None:
    """Clip the gradients of `parameters` (the optimizer's) to a global 2-norm of max_norm:
    torch.nn.utils.clip_grad_norm_, or for tk_kernels.AdamW the same clipping inside its next step()
    (one read of the gradients fewer; the norm is then optimizer.grad_norm after the step)."""
    if isinstance(optimizer, optim_ops.AdamW):
        optimizer.clip_grad_norm_(max_norm)
    else:
        torch.nn.utils.clip_grad_norm_(parameters, max_norm)
