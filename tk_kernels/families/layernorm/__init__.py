"""Residual add + LayerNorm on our CUDA kernels: the custom ops tk::add_layer_norm_fwd /
tk::add_layer_norm_bwd and, with dropout on delta, tk::dropout_add_layer_norm_fwd / _bwd (ops.py), and
their CUDA sources (csrc/). The package exposes ops.layer_norm and ops.add_layer_norm as
tk_kernels.layer_norm and tk_kernels.add_layer_norm."""

from .ops import (MAX_WIDTH, MIN_WIDTH, SUPPORTED_DTYPES, WIDTH_MULTIPLE, add_layer_norm, add_layer_norm_op,
                  dropout_mask, dropout_reason, dtypes_reason, keep_scale, layer_norm, tensor_reason,
                  unsupported_reason, width_reason)

__all__ = ["MAX_WIDTH", "MIN_WIDTH", "SUPPORTED_DTYPES", "WIDTH_MULTIPLE", "add_layer_norm", "add_layer_norm_op",
           "dropout_mask", "dropout_reason", "dtypes_reason", "keep_scale", "layer_norm", "tensor_reason",
           "unsupported_reason", "width_reason"]
