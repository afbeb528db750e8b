// Philox4x32-R, the counter-based random number generator of Salmon, Moraes, Dror and Shaw,
// "Parallel random numbers: as easy as 1, 2, 3" (SC 2011): a keyed bijection of 128-bit counters.
// The same counter and key always give the same four 32-bit words, so a kernel can (re)generate
// the random numbers of any element from its coordinates alone, in any order and any tiling.
//
//   philox4x32<R>(counter, key) -> 4 x 32-bit words     philox4x32_10 = philox4x32<10>
//
// R rounds of: (hi0, lo0) = M0 * c0, (hi1, lo1) = M1 * c2 (32 x 32 -> 64-bit products),
//              c = {hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0},   key += {W0, W1} between rounds.
// Random123's default is 10 rounds; the paper finds 7 the fewest that pass TestU01's BigCrush for
// Philox4x32 (its Table 2), and FlashAttention-2's dropout uses 7. A family picks R (attention and LayerNorm:
// 10; the attention ran 7 in session 10, 200 fewer SASS instructions in the D = 64 Hopper dropout forward, and
// went back to 10 when shakespeare_char trained measurably worse on it: see its dropout.cuh).
// Pure integer arithmetic, usable on the host too (the CPU tests check it against a Python
// implementation and, for 10 rounds, the published known-answer vectors of Random123).
#pragma once
#include <cstdint>

namespace tk {

struct philox4 {
  uint32_t x, y, z, w;
};

namespace detail {
constexpr uint32_t PHILOX_M0 = 0xD2511F53u, PHILOX_M1 = 0xCD9E8D57u;  // round multipliers
constexpr uint32_t PHILOX_W0 = 0x9E3779B9u, PHILOX_W1 = 0xBB67AE85u;  // key schedule (golden ratio, sqrt(3) - 1)

__host__ __device__ __forceinline__ philox4 philox_round(philox4 c, uint32_t k0, uint32_t k1) {
  const uint64_t p0 = uint64_t(PHILOX_M0) * c.x;
  const uint64_t p1 = uint64_t(PHILOX_M1) * c.z;
  return {uint32_t(p1 >> 32) ^ c.y ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c.w ^ k1, uint32_t(p0)};
}
}  // namespace detail

template <int ROUNDS>
__host__ __device__ __forceinline__ philox4 philox4x32(philox4 c, uint32_t k0, uint32_t k1) {
  static_assert(ROUNDS >= 7 && ROUNDS <= 16, "philox4x32: 7 (the fewest that pass BigCrush) to 16 rounds");
#pragma unroll
  for (int r = 0; r < ROUNDS; r++) {
    if (r > 0) {
      k0 += detail::PHILOX_W0;
      k1 += detail::PHILOX_W1;
    }
    c = detail::philox_round(c, k0, k1);
  }
  return c;
}
__host__ __device__ __forceinline__ philox4 philox4x32_10(philox4 c, uint32_t k0, uint32_t k1) {
  return philox4x32<10>(c, k0, k1);
}

// Rounds R0 .. ROUNDS - 1 of philox4x32<ROUNDS>, continuing from the state c that rounds 0 .. R0 - 1 left (k0,
// k1: the ORIGINAL key; round r uses it plus r times the schedule constants). For callers that computed the
// first rounds some cheaper way (e.g. hoisted the parts that do not depend on the varying counter word).
template <int R0, int ROUNDS>
__host__ __device__ __forceinline__ philox4 philox4x32_from(philox4 c, uint32_t k0, uint32_t k1) {
  static_assert(R0 >= 1 && R0 < ROUNDS, "philox4x32_from: rounds R0 .. ROUNDS - 1");
#pragma unroll
  for (int r = R0; r < ROUNDS; r++) c = detail::philox_round(c, k0 + uint32_t(r) * detail::PHILOX_W0, k1 + uint32_t(r) * detail::PHILOX_W1);
  return c;
}

}  // namespace tk
