"""
AdamW on our kernels: torch.optim.AdamW whose step is one pass over all parameters, with
torch.nn.utils.clip_grad_norm_ folded in.

    opt = tk_kernels.AdamW(groups, lr=6e-4, betas=(0.9, 0.95))   # or dispatch.adamw(kernels, groups, ...)
    loss.backward()
    opt.clip_grad_norm_(1.0)     # the clipping of clip_grad_norm_(params, 1.0), applied inside the next step()
    opt.step()                   # grad-norm kernel + AdamW kernel (csrc/adamw.cu), a launch or two each
    opt.grad_norm                # the gradients' global norm that step clipped with (0-dim CUDA tensor)

train.py's step before: clip_grad_norm_ (a norm per tensor, their norm, every gradient scaled in place) and
torch's fused AdamW (launches of a few dozen tensors each). Here the norm kernel reads each gradient once, and
the AdamW kernel reads p, g, m, v and writes p, m, v once, scaling g in registers: the gradients are left
unscaled (clip_grad_norm_ scales them in place; nothing in a training step reads them after the update).

The arithmetic and the state are torch.optim.AdamW's (decoupled weight decay; state 'step', 'exp_avg',
'exp_avg_sq' per parameter, 'step' a CPU float32 tensor as in torch's non-fused AdamW), so state_dict()
and load_state_dict() are interchangeable with torch.optim.AdamW's, fused or not. Supported: fp32 CUDA
parameters on one device with dense fp32 gradients, a float lr; not amsgrad, maximize, capturable or
differentiable (step() raises TKUnsupportedError for those: dispatch.adamw picks torch's AdamW then).
Parameters without a gradient are skipped, as torch does. The step is not CUDA-graph capturable: the
bias corrections of each step are computed on the host and passed to the kernel, so step() raises during a
capture (as torch's AdamW does without capturable=True) rather than record a graph that would replay them.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ...reference import as_param_groups
from ...support import capability_reason, device_reason, extension


def _ext():
    """The compiled optimizer extension (built on first use, then cached on disk and per process)."""
    return extension("optim")


class AdamW(torch.optim.AdamW):
    """torch.optim.AdamW with its step (and an optional gradient-norm clipping) on tk_kernels' AdamW kernel."""

    def __init__(self, params, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        self.max_grad_norm: float | None = None  # set by clip_grad_norm_, used and cleared by the next step()
        self.grad_norm: Tensor | None = None     # the global gradient norm of the last clipped step
        self.copies: dict[Tensor, Tensor] = {}   # parameter -> its 16-bit copy, rewritten by every step

    def keep_copies(self, copies: dict[Tensor, Tensor]) -> None:
        """From the next step() on, write each updated parameter p (one of this optimizer's) rounded to
        copies[p]'s dtype into copies[p] (contiguous bf16 / fp16, p's shape, on p's device), inside the update
        kernel: the 16-bit weights a model's GEMMs read (model.py's GPT.keep_weight16), 2 bytes a parameter
        more written where a separate cast would read 4 and write 2."""
        owned = {p for group in self.param_groups for p in group["params"]}
        for p, c in copies.items():
            if p not in owned:
                _check("keep_copies: a parameter that is not this optimizer's")
            if (c.dtype not in (torch.bfloat16, torch.float16) or c.shape != p.shape or c.device != p.device
                    or not c.is_contiguous()):
                _check(f"keep_copies: a copy must be a contiguous bf16 / fp16 tensor of its parameter's shape "
                       f"{tuple(p.shape)} on {p.device}, got {c.dtype} {tuple(c.shape)} on {c.device}")
        self.copies.update(copies)

    def clip_grad_norm_(self, max_norm: float) -> None:
        """Clip the gradients of this optimizer's parameters to a global 2-norm of max_norm, as
        torch.nn.utils.clip_grad_norm_(params, max_norm) would, inside the next step() (which reads them
        anyway): the norm is there afterwards as self.grad_norm. max_norm <= 0: no clipping."""
        self.max_grad_norm = float(max_norm) if max_norm > 0 else None

    @torch.no_grad()
    def step(self, closure=None):
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            _check("the step cannot be captured in a CUDA graph (each step's bias corrections are computed on the "
                   "host and would be frozen in the graph)")
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        params, grads, exp_avgs, exp_avg_sqs, steps, owners = [], [], [], [], [], []
        for group in self.param_groups:
            _check(options_reason(group))
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.grad.is_sparse:
                    _check("sparse gradients are not supported")
                state = self.state[p]
                if len(state) == 0:
                    _check(param_reason(p))
                    state["step"] = torch.tensor(0.0)
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                elif state["step"].device.type != "cpu":  # loaded from a fused or capturable torch AdamW
                    state["step"] = state["step"].cpu()
                params.append(p)
                grads.append(p.grad)
                exp_avgs.append(state["exp_avg"])
                exp_avg_sqs.append(state["exp_avg_sq"])
                steps.append(state["step"])
                owners.append(group)
        max_norm, self.max_grad_norm = self.max_grad_norm, None
        if not params:
            return loss
        torch._foreach_add_(steps, 1.0)
        values, folded = [], {}
        for group, t in zip(owners, torch.stack(steps).tolist()):
            key = (id(group), t)
            if key not in folded:
                beta1, beta2 = group["betas"]
                lr = group["lr"]
                folded[key] = [1.0 - lr * group["weight_decay"], lr / (1.0 - beta1 ** t),
                               math.sqrt(1.0 - beta2 ** t), beta1, beta2, group["eps"]]
            values += folded[key]
        copies = [self.copies.get(p, _NO_COPY) for p in params] if self.copies else []
        norm = _ext().adamw_step_(params, grads, exp_avgs, exp_avg_sqs, values, max_norm or 0.0, copies)
        if norm is not None:
            self.grad_norm = norm
        return loss


_NO_COPY = torch.empty(0)  # a parameter without a 16-bit copy (the kernel skips empty entries)


def _check(reason: str | None) -> None:
    if reason is not None:
        from ...dispatch import TKUnsupportedError  # not at import: dispatch imports this module
        raise TKUnsupportedError(f"tk AdamW: {reason}; use torch.optim.AdamW (kernels=torch)")


def options_reason(group: dict) -> str | None:
    """Why the AdamW kernel cannot take this parameter group's options, or None."""
    for option in ("amsgrad", "maximize", "capturable", "differentiable"):
        if group.get(option):
            return f"{option}=True is not supported"
    if isinstance(group["lr"], Tensor):
        return "a tensor lr is not supported (pass a float)"
    return None


def param_reason(p: Tensor) -> str | None:
    """Why the AdamW kernel cannot update parameter p (with its gradient, if it has one), or None."""
    if p.device.type != "cuda":
        return f"parameters must be CUDA tensors, got one on {p.device}"
    if p.dtype != torch.float32:
        return f"parameters must be float32 (the kernel keeps fp32 master weights), got {p.dtype}"
    if not p.is_contiguous():
        return f"parameters must be contiguous, got one of shape {tuple(p.shape)} strides {p.stride()}"
    g = p.grad
    if g is not None and (g.is_sparse or g.dtype != torch.float32 or not g.is_contiguous()):
        return f"gradients must be dense contiguous float32, got {g.dtype}{' sparse' if g.is_sparse else ''}"
    return None


def params_reason(param_groups) -> str | None:
    """Why tk_kernels.AdamW cannot train these parameter groups (as torch.optim takes them: dicts, or
    parameters), or None: every parameter a contiguous fp32 CUDA tensor, all on one device."""
    devices = set()
    for group in as_param_groups(param_groups):
        for p in group["params"]:
            reason = param_reason(p)
            if reason is not None:
                return reason
            devices.add(p.device)
    if len(devices) > 1:
        return f"parameters must all be on one device, got {', '.join(sorted(map(str, devices)))}"
    return None


# -----------------------------------------------------------------------------
# support checks

def unsupported_reason(device: torch.device, dtype: torch.dtype, dims: dict) -> str | None:
    """Why the tk AdamW cannot run on this device, or None (the check dispatch makes once per plan; the
    parameters' dtype is checked when the optimizer is made: dtype here is the model's compute dtype, which
    does not matter). May build the extension."""
    if device.type != "cuda":
        return f"no CUDA GPU (tensors are on {device.type}); the TK kernels need an NVIDIA GPU"
    if not torch.cuda.is_available():
        return "no usable CUDA GPU (torch.cuda.is_available() is False)"
    return environment_reason(device)


def gpu_reason(major: int, minor: int, name: str) -> str | None:
    """Why the kernel cannot run on GPU `name` of compute capability major.minor, or None. No GPU query."""
    return capability_reason("tk AdamW", major, minor, name)


def build_reason(major: int, minor: int) -> str | None:
    """Why the extension cannot run on this compute capability (it does not build / load, other archs)."""
    from tk_kernels.build import load_reason  # not at import (python -m tk_kernels.build)
    return load_reason("optim", major, minor)


_env_reasons: dict[int, str | None] = {}  # device index -> environment_reason


def environment_reason(device: torch.device) -> str | None:
    """Why the kernel cannot run on this CUDA device (GPU generation, build), or None; once per device."""
    return device_reason(_env_reasons, device, gpu_reason, build_reason)
