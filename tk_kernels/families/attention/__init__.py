"""Flash attention on our CUDA tile kernels: the custom ops tk::attention_fwd / tk::attention_bwd and, on a
fused (B, T, 3C) projection, tk::attention_qkv_fwd / tk::attention_qkv_bwd (ops.py), and their CUDA sources
(csrc/). The package exposes ops.attention as tk_kernels.attention, ops.attention_qkv as tk_kernels.attention_qkv."""

from .ops import (MIN_SMEM_BYTES, SUPPORTED_DTYPES, SUPPORTED_HEAD_DIMS, attention, attention_op,
                  attention_qkv, attention_qkv_op, check_supported, dropout_mask, is_available,
                  unavailable_reason, unsupported_reason)

__all__ = ["MIN_SMEM_BYTES", "SUPPORTED_DTYPES", "SUPPORTED_HEAD_DIMS", "attention", "attention_op",
           "attention_qkv", "attention_qkv_op", "check_supported", "dropout_mask", "is_available",
           "unavailable_reason", "unsupported_reason"]
