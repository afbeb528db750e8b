// Dropout from a counter-based generator: the pieces every kernel family's dropout shares. A family
// decides which Philox counter each element's random bits come from (its own csrc/, e.g. the
// attention's (head, query, key) groups or the LayerNorm's 8-element chunks); this header holds what
// does not depend on that choice:
//
//   philox_state              seed and offset of PyTorch's CUDA generator for one call, as values (eager)
//                             or as device pointers plus an intra-graph offset (CUDA-graph capture: read
//                             when the kernel runs, so every replay draws a fresh mask)
//   dropout_key               what a kernel keeps in registers: the Philox key (k0, k1), the counter's
//                             offset word c3 and the keep threshold
//   make_dropout_key(seed, offset, threshold)   key = {seed_lo, seed_hi ^ offset_hi}, c3 = offset_lo
//   load_dropout_key(state, threshold, seed&, offset&)   the same from a philox_state (device)
//   dropout_threshold(p)      round(p * 2^16) capped at 2^16 - 1 (host): keep iff a 16-bit uniform >= it,
//                             so P(keep) = 1 - p to 2^-17 and every p < 1 keeps something
//   philox_word(r, w)         word w (0..3) of a Philox output
//   dropout_keep_half(d, x, hi)            keep test of the low / high 16-bit half of word x
//   dropout_keep_pair(x, thr16, lo, hi)    both halves at once with thr16 = threshold << 16
//
// A call's (seed, offset) pair is unique (the generator's offset advances per call), and it enters
// every counter (c3) and key (k1), so two calls never share a counter; the families keep their counters
// apart from each other and from PyTorch's own Philox kernels by fixed bits of counter word 1 (attention:
// bit 31; LayerNorm: bit 30; PyTorch's: 0 in practice, the high word of offset / 4).
#pragma once
#include <cstdint>

#include "philox.cuh"

namespace tk {

// Seed and offset of one dropout call (at::PhiloxCudaState copied field by field by the torch glue, so
// kernel files see no ATen types). captured == false: seed / offset are the values; true: seed_ptr /
// offset_ptr point at them and offset_intragraph is added to the offset.
struct philox_state {
  uint64_t seed, offset;                 // captured == false
  const int64_t *seed_ptr, *offset_ptr;  // captured == true
  uint64_t offset_intragraph;
  bool captured;
};

// What a dropout kernel keeps in registers: the Philox key, the counter's offset word, the threshold.
struct dropout_key {
  uint32_t k0, k1, c3;
  uint32_t threshold;  // keep iff the 16-bit uniform >= threshold
};

__host__ __device__ __forceinline__ dropout_key make_dropout_key(uint64_t seed, uint64_t offset, uint32_t threshold) {
  return {uint32_t(seed), uint32_t(seed >> 32) ^ uint32_t(offset >> 32), uint32_t(offset), threshold};
}

// Seed and offset of a philox_state (graph capture: read from device memory now), and the key.
__device__ __forceinline__ dropout_key load_dropout_key(const philox_state &r, uint32_t threshold, uint64_t &seed,
                                                        uint64_t &offset) {
  if (r.captured) {
    seed = uint64_t(*r.seed_ptr);
    offset = uint64_t(*r.offset_ptr) + r.offset_intragraph;
  } else {
    seed = r.seed;
    offset = r.offset;
  }
  return make_dropout_key(seed, offset, threshold);
}

// Keep threshold of dropout probability p in [0, 1): round(p * 2^16), capped at 2^16 - 1.
inline uint32_t dropout_threshold(float p) {
  const double t = double(p) * 65536.0 + 0.5;
  return t >= 65535.0 ? 65535u : uint32_t(t);
}

__host__ __device__ __forceinline__ uint32_t philox_word(const philox4 &r, int w) {
  return w & 2 ? (w & 1 ? r.w : r.z) : (w & 1 ? r.y : r.x);
}

// Keep test of the 16-bit half `hi` of random word x.
__host__ __device__ __forceinline__ bool dropout_keep_half(const dropout_key &d, uint32_t x, bool hi) {
  return (hi ? x >> 16 : x & 0xffffu) >= d.threshold;
}

// Whether the low / high 16-bit half of random word x is kept, with thr16 = threshold << 16: no extraction of
// the high half, one shift for the low one (3 instructions per word). (sm_90's VIMNMX.U16x2 gives both
// predicates in one instruction, __vibmax_u16x2, but ptxas leaves two dead PRMTs next to each: measured the
// same count in the attention's dK / dV kernel, 2110 vs 2111 per block, so the one form for every
// architecture is kept.)
__host__ __device__ __forceinline__ void dropout_keep_pair(uint32_t x, uint32_t thr16, bool &lo, bool &hi) {
  hi = x >= thr16;          // (x >> 16) >= threshold
  lo = (x << 16) >= thr16;  // (x & 0xffff) >= threshold
}

}  // namespace tk
