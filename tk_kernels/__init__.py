"""
tk_kernels: ThunderKittens-style CUDA tile kernels for nanoGPT-TK (map: tk_kernels/README.md).

    import tk_kernels
    o = tk_kernels.attention(q, k, v, causal=True)     # our CUDA kernel (needs a GPU)
    o = tk_kernels.attention_qkv(qkv, n_head)          # the same on a fused (B, T, 3C) projection
    s, y = tk_kernels.add_layer_norm(x, delta, w, b)   # s = x + delta, y = LayerNorm(s)
    y = tk_kernels.layer_norm(x, w, b)
    tk_kernels.is_available()                          # can it run here?
    tk_kernels.check_supported(q, k, v)                # None, or why not
    loss = tk_kernels.linear_cross_entropy(x, w, targets)   # lm_head + cross-entropy, chunked
    y = tk_kernels.mlp(x, w_fc, b_fc, w_proj, b_proj)       # c_proj(gelu(c_fc(x))), Hopper GEMM
    y = tk_kernels.linear(x, w, b)                          # F.linear on the same GEMM
    opt = tk_kernels.AdamW(groups, lr, betas)               # torch.optim.AdamW, one pass over all params;
    opt.clip_grad_norm_(1.0); opt.step()                    #   the clipping folded into that pass

    plan = tk_kernels.dispatch.plan("auto", device, dtype, head_dim=64)   # once per model
    y = tk_kernels.dispatch.attention(plan, q, k, v, causal=True)         # per call

Importing this package registers the torch custom ops (tk::attention_fwd/_bwd, tk::attention_qkv_fwd/_bwd,
tk::add_layer_norm_fwd/_bwd, tk::linear_cross_entropy_fwd/_bwd/_loss, tk::mlp_fwd/_bwd, tk::linear_fwd/_bwd) and
nothing more: it never builds the CUDA extension and never needs a GPU. The build happens on the
first kernel call or plan on a GPU (python -m tk_kernels.build builds ahead of time).
"""

from . import reference
from . import dispatch
from .dispatch import KERNEL_MODES, TKUnsupportedError
from .families.attention import attention, attention_qkv, check_supported, is_available
from .families.classifier import linear_cross_entropy
from .families.layernorm import add_layer_norm, layer_norm
from .families.mlp import linear, mlp
from .families.optim import AdamW

__all__ = ["attention", "attention_qkv", "add_layer_norm", "layer_norm", "linear_cross_entropy", "mlp", "linear", "AdamW",
           "is_available", "check_supported", "dispatch", "reference", "KERNEL_MODES", "TKUnsupportedError"]
