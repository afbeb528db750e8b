// Dropout on delta, the sublayer output the LayerNorm family adds to the residual stream x:
//     s = x + dropout(delta),   dropout(delta) = keep ? delta * (1 / (1 - p)) : 0   (rounded to delta's dtype)
// Which elements are kept is a pure function of (seed, offset, element index i = row * cols + col of the
// (rows, cols) delta), so the forward applies a mask that the backward regenerates exactly (never stored),
// whatever rows a CTA or thread takes.
//
// Random numbers: one Philox4x32-10 call (tk/common/philox.cuh) per CHUNK of 8 consecutive elements,
// chunk = i >> 3 (cols is a multiple of 8, so a chunk lies in one row and is exactly the 16-byte vector a
// thread of the kernels loads; config.cuh):
//     counter = { chunk_lo,  2^30 | chunk_hi,  0,  offset_lo }      key = { seed_lo,  seed_hi ^ offset_hi }
// Element j = i & 7 takes the 16-bit half j & 1 of word j >> 1 and is kept iff that uniform u >= threshold
// = round(p * 2^16) (tk/common/dropout.cuh: P(keep) = 1 - p to 2^-17, the attention family's rule): all
// 128 bits of every call are used. Bit 30 of counter word 1 keeps these counters apart from the attention
// family's (bit 31 set) and from PyTorch's own Philox kernels (their word 1 is the high word of offset / 4:
// 0 in practice); chunk_hi < 2^30 for any tensor of fewer than 2^65 elements.
//
// Seed and offset: from PyTorch's default CUDA generator (bindings.cpp, glue/philox_glue.h), as a
// tk::philox_state: values in eager calls, pointers read when the kernel runs under CUDA-graph capture.
// The forward writes the (seed, offset) it used into a (2,) int64 tensor (rng_state); the backward and the
// debug mask kernel (dropout_mask.cu) read them from there as a captured state (offset_intragraph 0).
#pragma once
#include <cstdint>

#include "layernorm.h"
#include "tk.cuh"

namespace tk_ln {

constexpr uint32_t DROPOUT_COUNTER_TAG = 0x40000000u;  // bit 30 of counter word 1 (see the header)

// The four Philox words of chunk `chunk` (element index / 8).
__host__ __device__ __forceinline__ tk::philox4 dropout_chunk_words(const tk::dropout_key &d, uint64_t chunk) {
  const tk::philox4 c{uint32_t(chunk), DROPOUT_COUNTER_TAG | uint32_t(chunk >> 32), 0u, d.c3};
  return tk::philox4x32_10(c, d.k0, d.k1);
}

// Whether element `index` of delta is kept: the definition, one element at a time (host tests).
__host__ __device__ __forceinline__ bool dropout_keep(const tk::dropout_key &d, uint64_t index) {
  const int j = int(index & 7);
  return tk::dropout_keep_half(d, tk::philox_word(dropout_chunk_words(d, index >> 3), j >> 1), j & 1);
}

// f(j, keep) for the 8 elements j of chunk `chunk`, with thr16 = threshold << 16: one Philox call, both halves
// of a word tested at once (tk::dropout_keep_pair). The same bits as dropout_keep.
template <typename F>
__host__ __device__ __forceinline__ void dropout_chunk(const tk::dropout_key &d, uint32_t thr16, uint64_t chunk, F &&f) {
  const tk::philox4 r = dropout_chunk_words(d, chunk);
#pragma unroll
  for (int w = 0; w < 4; w++) {
    bool lo, hi;
    tk::dropout_keep_pair(tk::philox_word(r, w), thr16, lo, hi);
    f(2 * w, lo);
    f(2 * w + 1, hi);
  }
}

// The keep bits of chunk `chunk`: bit j = element j kept.
__host__ __device__ __forceinline__ uint32_t dropout_bits8(const tk::dropout_key &d, uint32_t thr16, uint64_t chunk) {
  uint32_t bits = 0;
  dropout_chunk(d, thr16, chunk, [&](int j, bool keep) { bits |= uint32_t(keep) << j; });
  return bits;
}

// v[j] = keep ? round_D(v[j] * keep_scale) : 0 for the 8 elements of chunk `chunk`: F.dropout's output in
// delta's dtype D (which it rounds to before the add), from v = float(delta).
template <typename D>
__device__ __forceinline__ void dropout8(float (&v)[8], const tk::dropout_key &d, uint32_t thr16, uint64_t chunk,
                                         float keep_scale) {
  dropout_chunk(d, thr16, chunk, [&](int j, bool keep) { v[j] = keep ? v[j] * keep_scale : 0.f; });
  tk::round_to<D>(v);
}

// The same from the chunk's keep bits (bits 0..7 of `bits`, dropout_bits8).
template <typename D>
__device__ __forceinline__ void apply_keep8(float (&v)[8], uint32_t bits, float keep_scale) {
#pragma unroll
  for (int j = 0; j < 8; j++) v[j] = (bits >> j) & 1u ? v[j] * keep_scale : 0.f;
  tk::round_to<D>(v);
}

// Kernel-side dropout arguments (forward and backward).
struct dropout_args {
  tk::philox_state rng;   // forward: the generator state; backward: rng_state read as a captured state
  uint32_t threshold;     // round(p * 2^16), at most 2^16 - 1
  float keep_scale;       // 1 / (1 - p)
  int64_t *rng_out;       // forward: (seed, offset) used, written by CTA 0 (nullptr: not written)
};

// The arguments of a forward drawing from `rng` (writing what it used to rng_out), or of a backward / mask
// kernel reading rng_state (the forward's (seed, offset)).
inline dropout_args make_dropout_args(const tk::philox_state &rng, float p, int64_t *rng_out) {
  return {rng, tk::dropout_threshold(p), dropout_keep_scale(p), rng_out};
}
inline dropout_args make_dropout_args(const int64_t *rng_state, float p) {
  return make_dropout_args(tk::philox_state{0, 0, rng_state, rng_state + 1, 0, true}, p, nullptr);
}

}  // namespace tk_ln
