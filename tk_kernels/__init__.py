"""
tk_kernels: ThunderKittens-style CUDA tile kernels for nanoGPT-TK.

    import tk_kernels
    o = tk_kernels.attention(q, k, v, causal=True)     # our CUDA kernel (needs a GPU)
    tk_kernels.is_available()                          # can it run here?
    tk_kernels.check_supported(q, k, v)                # None, or why not
    tk_kernels.dispatch.attention(q, k, v, causal=True, dropout_p=0.0, kernels="auto")

`attention`, `is_available` and `check_supported` come from tk_kernels/attention.py
and are imported on first use, so importing this package never builds anything
and never needs CUDA. `dispatch` chooses between our kernels and the PyTorch
reference ops in `reference` according to the `kernels` setting (KERNEL_MODES).

Note: `tk_kernels.attention` is the attention *function*. To reach the module
that defines it, use `from tk_kernels.attention import ...` or
importlib.import_module("tk_kernels.attention").
"""

import importlib
import sys
import types

from . import reference
from . import dispatch
from .dispatch import KERNEL_MODES, TKUnsupportedError

_LAZY = ("attention", "is_available", "check_supported")


def _attention_module() -> types.ModuleType:
    """Import (once) and return tk_kernels/attention.py."""
    return importlib.import_module(__name__ + ".attention")


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(_attention_module(), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _Package(types.ModuleType):
    # Importing the submodule tk_kernels.attention makes Python bind it as the
    # package attribute `attention`, which would shadow the attention function.
    # Keep the function there instead (the module stays in sys.modules).
    def __setattr__(self, name, value):
        if name in _LAZY and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

__all__ = ["attention", "is_available", "check_supported", "dispatch", "reference",
           "KERNEL_MODES", "TKUnsupportedError"]
