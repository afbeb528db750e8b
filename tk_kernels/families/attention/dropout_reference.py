"""
The attention dropout's keep mask in plain Python / PyTorch: an independent implementation of
csrc/dropout.cuh (the element -> random bits map; Philox4x32 with ROUNDS = 10 rounds, from
tk_kernels/philox_reference.py), for tests.

    philox4x32((c0, c1, c2, c3), (k0, k1), rounds) -> (x0, x1, x2, x3)  one block, Python ints
    keep_mask(seed, offset, B, H, T, dropout_p, device) -> (B, H, T, T) bool, True = kept

The kernels keep element (bh, q, k) iff a 16-bit uniform u >= round(p * 2^16) (capped at 2^16 - 1),
where u is half (k >> 3) & 1 of word (q >> 3) & 3 of
    philox4x32((k >> 4 << 3 | k & 7,  2^31 | q >> 5 << 3 | q & 7,  bh,  offset mod 2^32),
               (seed mod 2^32,  (seed >> 32) ^ (offset >> 32)),  ROUNDS)
"""

from __future__ import annotations

import torch

# Philox and the threshold are shared with the LayerNorm family's reference (tk_kernels/philox_reference.py)
from ...philox_reference import (MASK32, M0, M1, W0, W1, philox4x32, philox4x32_10, philox4x32_10_tensor,  # noqa: F401
                                 philox4x32_tensor, threshold)

ROUNDS = 10  # Philox rounds of the attention's dropout (csrc/dropout.cuh: DROPOUT_ROUNDS)


def keep_mask(seed: int, offset: int, B: int, H: int, T: int, dropout_p: float,
              device: torch.device | str = "cpu") -> torch.Tensor:
    """(B, H, T, T) bool keep mask of the dropout with this seed and offset (True = kept)."""
    seed, offset = seed & (2**64 - 1), offset & (2**64 - 1)
    i64 = dict(dtype=torch.int64, device=device)
    bh = torch.arange(B * H, **i64).view(-1, 1, 1)
    q = torch.arange(T, **i64).view(1, -1, 1)
    k = torch.arange(T, **i64).view(1, 1, -1)
    c0 = ((k >> 4) << 3) | (k & 7)
    c1 = (1 << 31) | ((q >> 5) << 3) | (q & 7)
    c3 = torch.full((1, 1, 1), offset & MASK32, **i64)
    words = philox4x32_tensor([c0, c1, bh, c3], seed & MASK32, ((seed >> 32) ^ (offset >> 32)) & MASK32, ROUNDS)
    words = [w.expand(B * H, T, T) for w in words]
    w = (q >> 3) & 3
    x = torch.where(w == 0, words[0], torch.where(w == 1, words[1], torch.where(w == 2, words[2], words[3])))
    u = torch.where(((k >> 3) & 1) == 1, x >> 16, x & 0xFFFF)
    return (u >= threshold(dropout_p)).view(B, H, T, T)
