// Attention dropout: which elements of P = softmax(S) are kept, as a pure function of
// (seed, offset, b * H + h, query row q, key column k), so the forward applies a mask that the
// backward regenerates exactly (never stored), whatever tiling each kernel uses.
//
// Random numbers: Philox4x32-10 (tk/common/philox.cuh), one call per GROUP of 8 elements
//     group(q, k) = (bh, q >> 5, k >> 4, q & 7, k & 7)        (q and k fix 3 bits each; the 8
//     elements are q + {0, 8, 16, 24} x k + {0, 8} inside their 32-row / 16-column block)
//     counter = { (k >> 4) << 3 | (k & 7),  1 << 31 | (q >> 5) << 3 | (q & 7),  bh,  offset_lo }
//     key     = { seed_lo,  seed_hi ^ offset_hi }
// Element (q, k) takes the 16-bit half (k >> 3) & 1 of word (q >> 3) & 3 of its group's output,
// and is kept iff that 16-bit uniform u >= threshold = round(p * 2^16): P(keep) = 1 - p to 2^-17
// (FlashAttention-2 quantises p to 8 bits). Why this grouping: the 8 elements of a group sit in
// ONE lane in every register tile the kernels use, so no random word is wasted: a lane of an
// mma fragment holds rows g, g + 8 and columns 2t, 2t + 1, 2t + 8, 2t + 9 (rt.cuh), so in the
// forward's 32-query x N-key S tile (rows = queries) it holds q = q0 + g + {0, 8, 16, 24} and
// k = k0 + 2t + e + {0, 8} + 16 j, and in the backward's transposed 16- or 32-key x 32-query
// S^T tiles (rows = keys) it holds k = key0 + g + {0, 8} and q = q0 + 2t + e + {0, 8, 16, 24}.
// Bit 31 of counter word 1 separates these counters from those of PyTorch's own Philox kernels
// (curand's counter there is the offset / 4 plus a small index: its word 1 stays 0 in practice).
// Kernels draw a tile's keep bits (dropout_bits_q for S tiles, dropout_bits_k for S^T tiles; one
// bit per element, e.g. 4 registers for a 32 x 128 tile) and apply them (apply_bits); the per-element
// dropout_keep is the definition, used by the debug mask kernel (dropout_mask.cu).
//
// Seed and offset: from PyTorch's CUDA generator (bindings.cpp: philox_cuda_state), passed as a
// dropout_rng: eager calls carry the values, calls under CUDA-graph capture carry pointers to
// them plus an intra-graph offset, read when the kernel runs (so each replay draws a fresh mask).
// The forward writes the (seed, offset) it used into a 2-element int64 tensor; the backward and
// the debug mask kernel read them from there (as a "captured" dropout_rng, offset_intragraph 0).
#pragma once
#include <cstdint>

#include "attention.h"
#include "tk.cuh"

namespace tk_attn {

using namespace tk;

// What a dropout kernel keeps in registers: the Philox key, the counter's offset word, the threshold.
struct dropout_key {
  uint32_t k0, k1, c3;
  uint32_t threshold;     // keep iff the 16-bit uniform >= threshold
};

__host__ __device__ __forceinline__ dropout_key make_dropout_key(uint64_t seed, uint64_t offset, uint32_t threshold) {
  return {uint32_t(seed), uint32_t(seed >> 32) ^ uint32_t(offset >> 32), uint32_t(offset), threshold};
}

// Seed and offset of a dropout_rng (graph capture: read from device memory now).
__device__ __forceinline__ dropout_key load_dropout_key(const dropout_rng &r, uint32_t threshold, uint64_t &seed,
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

// The Philox counter of element (q, k)'s group (see the header).
__host__ __device__ __forceinline__ philox4 dropout_counter(const dropout_key &d, int bh, int q, int k) {
  return {uint32_t(k >> 4) << 3 | uint32_t(k & 7), 0x80000000u | uint32_t(q >> 5) << 3 | uint32_t(q & 7),
          uint32_t(bh), d.c3};
}
__host__ __device__ __forceinline__ philox4 dropout_group(const dropout_key &d, int bh, int q, int k) {
  return philox4x32_10(dropout_counter(d, bh, q, k), d.k0, d.k1);
}
__host__ __device__ __forceinline__ uint32_t philox_word(const philox4 &r, int w) {
  return w & 2 ? (w & 1 ? r.w : r.z) : (w & 1 ? r.y : r.x);
}
// Keep test of the 16-bit half `hi` of random word x.
__host__ __device__ __forceinline__ bool dropout_keep_half(const dropout_key &d, uint32_t x, bool hi) {
  return (hi ? x >> 16 : x & 0xffffu) >= d.threshold;
}
// Whether element (q, k) of head bh is kept: the definition, one element at a time (the debug mask
// kernel; the tile functions below compute the same bits a group at a time).
__host__ __device__ __forceinline__ bool dropout_keep(const dropout_key &d, int bh, int q, int k) {
  return dropout_keep_half(d, philox_word(dropout_group(d, bh, q, k), (q >> 3) & 3), (k >> 3) & 1);
}

// The keep bits of one lane's elements of a register tile RT: bit ((i * width + j) * 4 + k) * 2 + e
// is element e of pair k of fragment (i, j) (the order of for_each_pair). Computed from the
// coordinates (dropout_bits_q / dropout_bits_k) before the tile is, then applied (apply_bits): the
// kernels hold R * C / 32 bits per lane (a 32 x 128 tile: 4 registers) instead of random words.
template <typename RT>
struct keep_bits {
  static constexpr int n = RT::height * RT::width * 8;
  uint32_t w[(n + 31) / 32];
  __host__ __device__ __forceinline__ void set(int bit, bool keep) {
    if (keep) w[bit >> 5] |= 1u << (bit & 31);
  }
  __host__ __device__ __forceinline__ bool get(int bit) const { return (w[bit >> 5] >> (bit & 31)) & 1u; }
};
template <typename RT>
__host__ __device__ __forceinline__ constexpr int keep_bit(int i, int j, int k, int e) {
  return ((i * RT::width + j) * 4 + k) * 2 + e;
}

// Keep bits of an S tile (rows = queries q0 + r, cols = keys k0 + c; row_l; the forward and the
// deterministic dQ kernel). R = 16 or 32 rows; needs k0 % 16 == 0 and q0 % R == 0.
// One Philox call per (16-column fragment j, pair element e): the 2 x 2 x 2 elements (rows g, g + 8 of
// both row fragments i; pairs k of the fragment) of one group. ROLLED (one 16-column fragment): the two
// calls run in a loop, so only one call's words are live (the D = 64 forward's register budget).
// (The _lane versions take the lane index: host code, the CPU tests, checks them element by element.)
template <typename RT, bool ROLLED = false>
__host__ __device__ __forceinline__ void dropout_bits_q_lane(keep_bits<RT> &b, const dropout_key &d, int bh, int q0,
                                                             int k0, int lane) {
  static_assert(RT::is_row && (RT::rows == 16 || RT::rows == 32), "dropout_bits_q: row_l tiles of 16 or 32 rows");
  const int g = lane >> 2, t = lane & 3;
  const int qw = RT::rows == 32 ? 0 : (q0 >> 3) & 2;  // word of the tile's first row (0 when q0 % 32 == 0)
#pragma unroll
  for (int x = 0; x < (b.n + 31) / 32; x++) b.w[x] = 0;
  if constexpr (ROLLED) {
    static_assert(RT::width == 1 && keep_bits<RT>::n <= 32, "dropout_bits_q<ROLLED>: one 16-column fragment");
#pragma unroll 1
    for (int e = 0; e < 2; e++) {
      const philox4 r = dropout_group(d, bh, q0 + g, k0 + 2 * t + e);
      uint32_t bits = 0;
#pragma unroll
      for (int i = 0; i < RT::height; i++)
#pragma unroll
        for (int k = 0; k < 4; k++)
          bits |= uint32_t(dropout_keep_half(d, philox_word(r, qw + 2 * i + (k & 1)), k >> 1)) << keep_bit<RT>(i, 0, k, 0);
      b.w[0] |= bits << e;  // keep_bit<RT>(i, 0, k, e) = keep_bit<RT>(i, 0, k, 0) + e
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < RT::width; j++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const philox4 r = dropout_group(d, bh, q0 + g, k0 + 16 * j + 2 * t + e);
#pragma unroll
      for (int i = 0; i < RT::height; i++)
#pragma unroll
        for (int k = 0; k < 4; k++)
          // row 16 i + g + 8 (k & 1): word 2 i + (k & 1); col 16 j + 2 t + e + 8 (k >> 1): half k >> 1
          b.set(keep_bit<RT>(i, j, k, e), dropout_keep_half(d, philox_word(r, qw + 2 * i + (k & 1)), k >> 1));
    }
}

// Keep bits of an S^T tile (rows = keys key0 + r, cols = queries q0 + c; row_l; the dK / dV kernels).
// R = 16 or 32 keys, key0 % 16 == 0; C = 16 with q0 % 16 == 0, or C % 32 == 0 with q0 % 32 == 0.
// One Philox call per (16-key band i, 32 queries jp, pair element e). ROLLED (tiles of <= 32 bits):
// the calls run in a loop rather than unrolled, so only one call's words are live (the split kernel's
// register budget).
template <typename RT, bool ROLLED = false>
__host__ __device__ __forceinline__ void dropout_bits_k_lane(keep_bits<RT> &b, const dropout_key &d, int bh, int key0,
                                                             int q0, int lane) {
  constexpr int C = RT::cols;
  static_assert(RT::is_row && (C == 16 || C % 32 == 0), "dropout_bits_k: row_l tiles of 16 or 32n query columns");
  constexpr int QG = C == 16 ? 1 : C / 32;  // groups of 32 queries
  constexpr int JJ = C == 16 ? 1 : 2;       // 16-column fragments per group
  const int g = lane >> 2, t = lane & 3;
  const int qw = C == 16 ? (q0 >> 3) & 2 : 0;
#pragma unroll
  for (int x = 0; x < (b.n + 31) / 32; x++) b.w[x] = 0;
  if constexpr (ROLLED) {
    static_assert(keep_bits<RT>::n <= 32, "dropout_bits_k<ROLLED>: one 32-bit word of keep bits");
#pragma unroll 1
    for (int ie = 0; ie < RT::height * QG * 2; ie++) {
      const int i = ie / (QG * 2), jp = ie / 2 % QG, e = ie % 2;
      const philox4 r = dropout_group(d, bh, q0 + 32 * jp + 2 * t + e, key0 + 16 * i + g);
      uint32_t bits = 0;
#pragma unroll
      for (int jj = 0; jj < JJ; jj++)
#pragma unroll
        for (int k = 0; k < 4; k++)
          bits |= uint32_t(dropout_keep_half(d, philox_word(r, qw + 2 * jj + (k >> 1)), k & 1))
                  << keep_bit<RT>(0, jj, k, 0);
      b.w[0] |= bits << keep_bit<RT>(i, 2 * jp, 0, e);  // keep_bit is linear in (i, j, e)
    }
  } else {
#pragma unroll
    for (int i = 0; i < RT::height; i++)
#pragma unroll
      for (int jp = 0; jp < QG; jp++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
          const philox4 r = dropout_group(d, bh, q0 + 32 * jp + 2 * t + e, key0 + 16 * i + g);
#pragma unroll
          for (int jj = 0; jj < JJ; jj++)
#pragma unroll
            for (int k = 0; k < 4; k++)
              // row 16 i + g + 8 (k & 1): half k & 1; col 32 jp + 16 jj + 2 t + e + 8 (k >> 1): word 2 jj + (k >> 1)
              b.set(keep_bit<RT>(i, 2 * jp + jj, k, e), dropout_keep_half(d, philox_word(r, qw + 2 * jj + (k >> 1)), k & 1));
        }
  }
}

template <typename RT, bool ROLLED = false>
__device__ __forceinline__ void dropout_bits_q(keep_bits<RT> &b, const dropout_key &d, int bh, int q0, int k0) {
  dropout_bits_q_lane<RT, ROLLED>(b, d, bh, q0, k0, laneid());
}
template <typename RT, bool ROLLED = false>
__device__ __forceinline__ void dropout_bits_k(keep_bits<RT> &b, const dropout_key &d, int bh, int key0, int q0) {
  dropout_bits_k_lane<RT, ROLLED>(b, d, bh, key0, q0, laneid());
}

// x = f(x, keep) on every element of a tile of the bits' shape (any dtype).
template <typename RB, typename RT, typename F>
__device__ __forceinline__ void apply_bits(RT &t, const keep_bits<RB> &b, F f) {
  static_assert(RB::rows == RT::rows && RB::cols == RT::cols && RB::is_row == RT::is_row, "apply_bits: shapes differ");
  for_each_pair<RT>([&](int i, int j, int k) {
    t.tiles[i][j][k].x = f(t.tiles[i][j][k].x, b.get(keep_bit<RT>(i, j, k, 0)));
    t.tiles[i][j][k].y = f(t.tiles[i][j][k].y, b.get(keep_bit<RT>(i, j, k, 1)));
  });
}
// x = f(x, y, keep) with y the same element of a second tile (fp32 tiles of one shape).
template <typename RB, typename RT, typename F>
__device__ __forceinline__ void apply_bits(RT &t, const RT &u, const keep_bits<RB> &b, F f) {
  static_assert(RB::rows == RT::rows && RB::cols == RT::cols && RB::is_row == RT::is_row, "apply_bits: shapes differ");
  for_each_pair<RT>([&](int i, int j, int k) {
    t.tiles[i][j][k].x = f(t.tiles[i][j][k].x, u.tiles[i][j][k].x, b.get(keep_bit<RT>(i, j, k, 0)));
    t.tiles[i][j][k].y = f(t.tiles[i][j][k].y, u.tiles[i][j][k].y, b.get(keep_bit<RT>(i, j, k, 1)));
  });
}

// Dropped elements -> 0 (the forward's P, the backward's P for dV; any dtype).
struct zero_dropped {
  template <typename X>
  __device__ __forceinline__ X operator()(X x, bool keep) const { return keep ? x : from_float<X>(0.f); }
};

// The backward's dS = P o (dP~ - delta) with dP~ = keep ? dP / (1 - p) : 0, from dP (ds) and P (p):
//     dropout_ds(ds, p, bits, keep_scale, sub_delta)   sub_delta(ds) subtracts the row / column broadcast
template <typename RB, typename RT, typename SubDelta>
__device__ __forceinline__ void dropout_ds(RT &ds, const RT &p, const keep_bits<RB> &b, float keep_scale, SubDelta sub_delta) {
  apply_bits(ds, b, [keep_scale](float x, bool keep) { return keep ? x * keep_scale : 0.f; });
  sub_delta(ds);
  mul(ds, ds, p);
}

// Kernel-side dropout arguments (forward and backward).
struct dropout_args {
  dropout_rng rng;
  uint32_t threshold;     // round(p * 2^16), at most 2^16 - 1
  float keep_scale;       // 1 / (1 - p)
  int64_t *rng_out;       // forward: (seed, offset) used, written by CTA 0 (nullptr: not written)
};

}  // namespace tk_attn
