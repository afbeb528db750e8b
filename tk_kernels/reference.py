"""
PyTorch reference implementations of the ops that tk_kernels accelerates.

These are the `kernels=torch` path of model.py and the ground truth that the
CUDA kernels are tested against. Each function has the same signature as its
dispatch twin in tk_kernels/dispatch.py (minus the `kernels` argument).
"""

import torch
import torch.nn.functional as F


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
              causal: bool = True, dropout_p: float = 0.0,
              scale: float | None = None) -> torch.Tensor:
    """softmax(q @ k^T * scale [+ causal mask]) @ v for (B, H, T, D) inputs.
    scale defaults to 1/sqrt(D). With causal=True and Tq != Tk the mask is
    aligned to the top-left, as in F.scaled_dot_product_attention."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=dropout_p,
                                          is_causal=causal, scale=scale)


def mlp(x: torch.Tensor, fc_weight: torch.Tensor, fc_bias: torch.Tensor | None,
        proj_weight: torch.Tensor, proj_bias: torch.Tensor | None) -> torch.Tensor:
    """The transformer MLP: proj(gelu(fc(x))), exact (erf) GELU as in nanoGPT.
    Weights use nn.Linear's (out_features, in_features) layout."""
    return F.linear(F.gelu(F.linear(x, fc_weight, fc_bias)), proj_weight, proj_bias)


def layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
               eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm over the last dimension with an optional bias."""
    return F.layer_norm(x, weight.shape, weight, bias, eps)


def linear_cross_entropy(x: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                         ignore_index: int = -1) -> torch.Tensor:
    """Mean cross-entropy of the logits F.linear(x, weight) over the targets that are not
    ignore_index: model.py's loss as it was computed before the fused classifier (under autocast
    the logits come out of the GEMM in bf16/fp16 and F.cross_entropy upcasts them to fp32).
    x (..., C), weight (V, C), targets (...)."""
    logits = F.linear(x, weight)
    return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=ignore_index)


def add_layer_norm(x: torch.Tensor, delta: torch.Tensor | None, weight: torch.Tensor,
                   bias: torch.Tensor | None, eps: float = 1e-5, dropout_p: float = 0.0,
                   delta_bias: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(s, layer_norm(s)) with s = x + delta (torch's type promotion), or s = x if delta is None:
    the residual add of a transformer block fused with the next LayerNorm. dropout_p > 0 (training):
    s = x + F.dropout(delta, dropout_p), nanoGPT's residual dropout before the add (nothing to drop
    without delta). delta_bias (the bias of the Linear whose output delta is, not added there):
    delta + delta_bias in delta's dtype, as the Linear would have returned it, in delta's place."""
    if delta_bias is not None:
        delta = (delta + delta_bias).to(delta.dtype)
    if delta is not None and dropout_p > 0.0:
        delta = F.dropout(delta, dropout_p)
    s = x if delta is None else x + delta
    return s, layer_norm(s, weight, bias, eps)


def as_param_groups(params) -> list[dict]:
    """What a torch.optim optimizer accepts (an iterable of parameters, or of dicts with "params"), as a list of
    dicts whose "params" are lists: the same groups, safe to read before the optimizer is made."""
    params = list(params)
    groups = params if params and isinstance(params[0], dict) else [{"params": params}]
    return [{**g, "params": list(g["params"])} for g in groups]


def adamw(param_groups, lr: float, betas: tuple[float, float], eps: float = 1e-8,
          weight_decay: float = 1e-2) -> torch.optim.Optimizer:
    """torch.optim.AdamW, fused (one multi-tensor CUDA kernel) where every parameter is a CUDA tensor: the
    optimizer nanoGPT trains with. Its gradient clipping is torch.nn.utils.clip_grad_norm_ (see
    dispatch.clip_grad_norm_)."""
    groups = as_param_groups(param_groups)
    fused = all(p.device.type == "cuda" for g in groups for p in g["params"]) and any(g["params"] for g in groups)
    return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                             **(dict(fused=True) if fused else {}))
