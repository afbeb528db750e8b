"""
The attention dropout's keep mask in plain Python / PyTorch: an independent implementation of
csrc/dropout.cuh (Philox4x32-10 and the element -> random bits map), for tests.

    philox4x32_10((c0, c1, c2, c3), (k0, k1)) -> (x0, x1, x2, x3)      one block, Python ints
    keep_mask(seed, offset, B, H, T, dropout_p, device) -> (B, H, T, T) bool, True = kept

The kernels keep element (bh, q, k) iff a 16-bit uniform u >= round(p * 2^16) (capped at 2^16 - 1),
where u is half (k >> 3) & 1 of word (q >> 3) & 3 of
    philox4x32_10((k >> 4 << 3 | k & 7,  2^31 | q >> 5 << 3 | q & 7,  bh,  offset mod 2^32),
                  (seed mod 2^32,  (seed >> 32) ^ (offset >> 32)))
"""

from __future__ import annotations

import struct

import torch

MASK32 = 0xFFFFFFFF
M0, M1 = 0xD2511F53, 0xCD9E8D57   # round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85   # key schedule


def philox4x32_10(ctr: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, int, int, int]:
    """Philox4x32-10 of one 128-bit counter under a 64-bit key (Random123's definition)."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        if r:
            k0, k1 = (k0 + W0) & MASK32, (k1 + W1) & MASK32
        p0, p1 = M0 * c0, M1 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & MASK32, p1 & MASK32, ((p0 >> 32) ^ c3 ^ k1) & MASK32, p0 & MASK32
    return c0, c1, c2, c3


def _mulhilo(m: int, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(hi, lo) 32-bit halves of m * a for a constant m < 2^32 and int64 a in [0, 2^32), without
    overflowing int64: a is split into 16-bit halves (each partial product < 2^48)."""
    p_lo = (a & 0xFFFF) * m
    p_hi = (a >> 16) * m
    mid = (p_lo & MASK32) + ((p_hi & 0xFFFF) << 16)
    return (p_lo >> 32) + (p_hi >> 16) + (mid >> 32), mid & MASK32


def philox4x32_10_tensor(c: list[torch.Tensor], k0: int, k1: int) -> list[torch.Tensor]:
    """philox4x32_10 on int64 tensors of 32-bit counter words (broadcast), one key."""
    c0, c1, c2, c3 = c
    for r in range(10):
        if r:
            k0, k1 = (k0 + W0) & MASK32, (k1 + W1) & MASK32
        hi0, lo0 = _mulhilo(M0, c0)
        hi1, lo1 = _mulhilo(M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return [c0, c1, c2, c3]


def threshold(dropout_p: float) -> int:
    """The kernels' keep threshold: round(p * 2^16) of p as a float32 (the launchers take float)."""
    p32 = struct.unpack("f", struct.pack("f", dropout_p))[0]
    return min(int(p32 * 65536.0 + 0.5), 65535)


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
    words = philox4x32_10_tensor([c0, c1, bh, c3], seed & MASK32, ((seed >> 32) ^ (offset >> 32)) & MASK32)
    words = [w.expand(B * H, T, T) for w in words]
    w = (q >> 3) & 3
    x = torch.where(w == 0, words[0], torch.where(w == 1, words[1], torch.where(w == 2, words[2], words[3])))
    u = torch.where(((k >> 3) & 1) == 1, x >> 16, x & 0xFFFF)
    return (u >= threshold(dropout_p)).view(B, H, T, T)
