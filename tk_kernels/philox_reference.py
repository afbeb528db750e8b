"""
Philox4x32-R in plain Python / PyTorch (R rounds: Random123's default 10; the attention's dropout uses 7) and the
dropout keep threshold: an independent implementation of tk_kernels/include/common/philox.cuh and
common/dropout.cuh, shared by the kernel families' Python mask references (families/attention/dropout_reference.py,
families/layernorm/dropout_reference.py), for tests.

    philox4x32((c0, c1, c2, c3), (k0, k1), rounds) -> (x0, x1, x2, x3)  one block, Python ints
    philox4x32_tensor([c0, c1, c2, c3], k0, k1, rounds)                 the same on int64 tensors (broadcast)
    philox4x32_10(ctr, key), philox4x32_10_tensor(c, k0, k1)            the same with 10 rounds
    threshold(p)                                                       round(p * 2^16) of float32(p), capped
    key(seed, offset) -> (k0, k1, c3)                                  the kernels' key and offset word
"""

from __future__ import annotations

import struct

import torch

MASK32 = 0xFFFFFFFF
M0, M1 = 0xD2511F53, 0xCD9E8D57   # round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85   # key schedule


def philox4x32(ctr: tuple[int, int, int, int], key: tuple[int, int], rounds: int) -> tuple[int, int, int, int]:
    """Philox4x32 with `rounds` rounds (Random123's definition) of one 128-bit counter under a 64-bit key."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(rounds):
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


def philox4x32_tensor(c: list[torch.Tensor], k0: int, k1: int, rounds: int) -> list[torch.Tensor]:
    """philox4x32 on int64 tensors of 32-bit counter words (broadcast), one key."""
    c0, c1, c2, c3 = c
    for r in range(rounds):
        if r:
            k0, k1 = (k0 + W0) & MASK32, (k1 + W1) & MASK32
        hi0, lo0 = _mulhilo(M0, c0)
        hi1, lo1 = _mulhilo(M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    return [c0, c1, c2, c3]


def philox4x32_10(ctr: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, int, int, int]:
    """Philox4x32-10 (Random123's default round count)."""
    return philox4x32(ctr, key, 10)


def philox4x32_10_tensor(c: list[torch.Tensor], k0: int, k1: int) -> list[torch.Tensor]:
    """philox4x32_tensor with 10 rounds."""
    return philox4x32_tensor(c, k0, k1, 10)


def threshold(dropout_p: float) -> int:
    """The kernels' keep threshold: round(p * 2^16) of p as a float32 (the launchers take float)."""
    p32 = struct.unpack("f", struct.pack("f", dropout_p))[0]
    return min(int(p32 * 65536.0 + 0.5), 65535)


def key(seed: int, offset: int) -> tuple[int, int, int]:
    """(k0, k1, c3) of a call with this seed and offset: key {seed_lo, seed_hi ^ offset_hi}, counter word 3
    offset_lo (common/dropout.cuh: make_dropout_key)."""
    seed, offset = seed & (2**64 - 1), offset & (2**64 - 1)
    return seed & MASK32, ((seed >> 32) ^ (offset >> 32)) & MASK32, offset & MASK32
