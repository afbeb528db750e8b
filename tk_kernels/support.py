"""
What the kernel families share (tk_kernels/families/*/ops.py): their compiled extension, loaded once per
process (extension), and the support checks' common part: why a family's kernels cannot run on a CUDA
device, asked once per device (device_reason: environment_reason, attention's hopper_reason), and the
pre-Ampere verdict the sm_80+ families share (capability_reason).
"""

from __future__ import annotations

from typing import Callable

import torch

_extensions: dict[str, object] = {}  # family -> its loaded extension module


def extension(family: str):
    """The compiled extension module of kernel family `family`: tk_kernels.build.load_extension (built on
    first use, then cached on disk) the first time, then kept here, so that the ops, which ask for it on
    every call, take neither the build's lock nor an import."""
    module = _extensions.get(family)
    if module is None:
        from .build import load_extension  # not at import: `python -m tk_kernels.build` imports the families
        module = _extensions[family] = load_extension(family)
    return module


MIN_CAPABILITY = (8, 0)  # the families' kernels need Ampere or newer (cp.async, bf16 mma.sync)


def capability_reason(label: str, major: int, minor: int, name: str) -> str | None:
    """Why `label`'s kernels (e.g. "tk attention") cannot run on GPU `name` of compute capability major.minor,
    if it is older than MIN_CAPABILITY, else None: every sm_80+ family's first gpu_reason check. No GPU query."""
    if (major, minor) < MIN_CAPABILITY:
        return (f"{label} needs a GPU of compute capability >= 8.0 (A100, H100, H200, ...), "
                f"got {name} with {major}.{minor}")
    return None


def device_reason(cache: dict[int, str | None], device: torch.device,
                  gpu_reason: Callable[[int, int, str], str | None],
                  build_reason: Callable[[int, int], str | None]) -> str | None:
    """Why a family's kernels cannot run on CUDA device `device` (index None: the current device), or
    None if they can; computed once per device index and kept in the family's `cache` (index -> reason).
    gpu_reason(major, minor, name) judges the GPU alone (its compute capability; no build), and only where
    it finds nothing build_reason(major, minor) judges the family's extension on it
    (tk_kernels.build.load_reason / arch_reason: may build it). A check that raises caches nothing."""
    index = device.index if device.index is not None else torch.cuda.current_device()
    if index not in cache:
        major, minor = torch.cuda.get_device_capability(index)
        reason = gpu_reason(major, minor, torch.cuda.get_device_name(index))
        cache[index] = reason if reason is not None else build_reason(major, minor)
    return cache[index]
