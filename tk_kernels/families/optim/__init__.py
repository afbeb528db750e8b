"""The optimizer on our kernels: tk_kernels.AdamW, torch.optim.AdamW whose step (with gradient-norm clipping
folded in) runs as one pass over all fp32 parameters (ops.py, csrc/adamw.cu)."""

from .ops import AdamW, environment_reason, options_reason, param_reason, params_reason, unsupported_reason

__all__ = ["AdamW", "environment_reason", "options_reason", "param_reason", "params_reason", "unsupported_reason"]
