"""The fused classifier (lm_head GEMM + cross-entropy, never materialising all logits): the custom ops
tk::linear_cross_entropy_fwd / _bwd / _loss (ops.py) and their CUDA kernels (csrc/). The package exposes
ops.linear_cross_entropy as tk_kernels.linear_cross_entropy."""

from .ops import (CHUNK_BYTES, MAX_VOCAB, SUPPORTED_DTYPES, chunk_rows, environment_reason,
                  linear_cross_entropy, linear_cross_entropy_op, tensor_reason, unsupported_reason)

__all__ = ["CHUNK_BYTES", "MAX_VOCAB", "SUPPORTED_DTYPES", "chunk_rows", "environment_reason",
           "linear_cross_entropy", "linear_cross_entropy_op", "tensor_reason", "unsupported_reason"]
