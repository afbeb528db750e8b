"""The MLP on our Hopper GEMM (csrc/gemm.cu: TMA ring, warpgroup MMA, fused bias / GELU / GELU'
epilogues): the custom ops tk::mlp_fwd/_bwd and tk::linear_fwd/_bwd (ops.py). The package exposes
ops.mlp and ops.linear as tk_kernels.mlp and tk_kernels.linear; ops.linear_op is what the model's attention
projections run (tk_kernels.dispatch.linear)."""

from .ops import (APPROXIMATIONS, SUPPORTED_DTYPES, environment_reason, linear, linear_op, mlp, mlp_op, tensor_reason,
                  unsupported_reason)

__all__ = ["APPROXIMATIONS", "SUPPORTED_DTYPES", "environment_reason", "linear", "linear_op", "mlp", "mlp_op",
           "tensor_reason", "unsupported_reason"]
