"""
The LayerNorm family's dropout mask in plain Python / PyTorch: an independent implementation of
csrc/dropout.cuh (the element -> random bits map; Philox4x32-10 from tk_kernels/philox_reference.py), for
tests.

    keep_mask(seed, offset, rows, cols, dropout_p, device) -> (rows, cols) bool, True = kept
    keep_element(seed, offset, index, dropout_p) -> bool          one element, Python ints

Element i = row * cols + col of delta is kept iff a 16-bit uniform u >= round(p * 2^16) (capped at
2^16 - 1), where u is half i & 1 of word (i >> 1) & 3 of
    philox4x32_10((chunk mod 2^32,  2^30 | chunk >> 32,  0,  offset mod 2^32),
                  (seed mod 2^32,  (seed >> 32) ^ (offset >> 32)))          chunk = i >> 3
"""

from __future__ import annotations

import torch

from ...philox_reference import MASK32, key, philox4x32_10, philox4x32_10_tensor, threshold

COUNTER_TAG = 1 << 30  # bit 30 of counter word 1 (csrc/dropout.cuh: DROPOUT_COUNTER_TAG)


def keep_element(seed: int, offset: int, index: int, dropout_p: float) -> bool:
    """Whether element `index` (row * cols + col) of delta is kept."""
    k0, k1, c3 = key(seed, offset)
    chunk = index >> 3
    words = philox4x32_10((chunk & MASK32, COUNTER_TAG | (chunk >> 32), 0, c3), (k0, k1))
    w = words[(index >> 1) & 3]
    u = w >> 16 if index & 1 else w & 0xFFFF
    return u >= threshold(dropout_p)


def keep_mask(seed: int, offset: int, rows: int, cols: int, dropout_p: float,
              device: torch.device | str = "cpu") -> torch.Tensor:
    """(rows, cols) bool keep mask of the dropout with this seed and offset (True = kept); cols % 8 == 0."""
    if cols % 8:
        raise ValueError(f"cols must be a multiple of 8, got {cols}")
    k0, k1, c3 = key(seed, offset)
    chunk = torch.arange(rows * cols // 8, dtype=torch.int64, device=device)
    words = philox4x32_10_tensor([chunk & MASK32, COUNTER_TAG | (chunk >> 32), torch.zeros_like(chunk),
                                  torch.full_like(chunk, c3)], k0, k1)
    w = torch.stack(words, dim=1)  # (chunks, 4): word j >> 1 holds elements j of the chunk
    halves = torch.stack([w & 0xFFFF, w >> 16], dim=2).reshape(-1, 8)  # element j: half j & 1 of word j >> 1
    return (halves >= threshold(dropout_p)).view(rows, cols)
