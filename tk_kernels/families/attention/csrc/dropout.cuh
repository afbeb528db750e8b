// Attention dropout: which elements of P = softmax(S) are kept, as a pure function of
// (seed, offset, b * H + h, query row q, key column k), so the forward applies a mask that the
// backward regenerates exactly (never stored), whatever tiling each kernel uses.
//
// Random numbers: Philox4x32-10 (tk/common/philox.cuh, Random123's default round count), one call per GROUP of 8
// elements. Seven rounds (FlashAttention-2's count, the fewest that pass BigCrush) were shipped in session 10 and
// taken back in session 11: fwd + bwd dropout overhead at (16,12,1024,64) +29.5% instead of +36.5%, but
// shakespeare_char's best val loss moved up, 1.4723-1.4787 over five Philox-7 runs against 1.4668 / 1.4708 /
// 1.4681 for Philox-10 and 1.4680 / 1.4725 / 1.4641 for kernels=torch in one call (bench/RESULTS.md, session 11)
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
// The forward and the transposed dK / dV kernel test the Philox words where they apply them, two elements
// per word (dropout_slice_q_lane, dropout_bwd_k: no packed bits; the latter with the Philox rounds that do
// not depend on the query hoisted, dropout_prefix_k); the split dK / dV and deterministic dQ kernels draw a
// tile's keep bits (dropout_bits_k / dropout_bits_q; one bit per element) and apply them (apply_bits). The
// per-element dropout_keep is the definition, used by the debug mask kernel (dropout_mask.cu); the CPU test
// checks every lane's flags of every tile shape against it. The Hopper kernels (wgmma accumulators, whose
// per-warp layout is the mma fragment's) use the same groups: the backward's 16-key S^T slices hold whole
// groups (dropout_bits_k_prefix_lane); the forward's 16-row warps hold half a group each, so a warp pair
// shares each call (dropout_bits_wg_lane, below).
//
// Seed and offset: from PyTorch's CUDA generator (bindings.cpp: philox_cuda_state), passed as a
// dropout_rng: eager calls carry the values, calls under CUDA-graph capture carry pointers to
// them plus an intra-graph offset, read when the kernel runs (so each replay draws a fresh mask).
// The forward writes the (seed, offset) it used into a 2-element int64 tensor; the backward and
// the debug mask kernel read them from there (as a "captured" dropout_rng, offset_intragraph 0).
#pragma once
#include <climits>
#include <cstdint>

#include "attention.h"
#include "tk.cuh"

namespace tk_attn {

using namespace tk;

// dropout_key, make_dropout_key, load_dropout_key (from a dropout_rng = tk::philox_state), philox_word,
// dropout_keep_half and dropout_keep_pair are the DSL's (tk/common/dropout.cuh), shared with the LayerNorm
// family; what follows is the attention's own counter layout and its tile functions.

// Philox rounds of the attention's dropout (see the header).
constexpr int DROPOUT_ROUNDS = 10;
// The Philox counter of element (q, k)'s group (see the header).
__host__ __device__ __forceinline__ philox4 dropout_counter(const dropout_key &d, int bh, int q, int k) {
  return {uint32_t(k >> 4) << 3 | uint32_t(k & 7), 0x80000000u | uint32_t(q >> 5) << 3 | uint32_t(q & 7),
          uint32_t(bh), d.c3};
}
__host__ __device__ __forceinline__ philox4 dropout_group(const dropout_key &d, int bh, int q, int k) {
  return philox4x32<DROPOUT_ROUNDS>(dropout_counter(d, bh, q, k), d.k0, d.k1);
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

// Keep bits of an S tile (rows = queries q0 + r, cols = keys k0 + c; row_l; the
// deterministic dQ kernel). R = 16 or 32 rows; needs k0 % 16 == 0 and q0 % R == 0.
// One Philox call per (16-column fragment j, pair element e): the 2 x 2 x 2 elements (rows g, g + 8 of
// both row fragments i; pairs k of the fragment) of one group.
// (The _lane versions take the lane index: host code, the CPU tests, checks them element by element.)
template <typename RT>
__host__ __device__ __forceinline__ void dropout_bits_q_lane(keep_bits<RT> &b, const dropout_key &d, int bh, int q0,
                                                             int k0, int lane) {
  static_assert(RT::is_row && (RT::rows == 16 || RT::rows == 32), "dropout_bits_q: row_l tiles of 16 or 32 rows");
  const int g = lane >> 2, t = lane & 3;
  const int qw = RT::rows == 32 ? 0 : (q0 >> 3) & 2;  // word of the tile's first row (0 when q0 % 32 == 0)
#pragma unroll
  for (int x = 0; x < (b.n + 31) / 32; x++) b.w[x] = 0;
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

template <typename RT>
__device__ __forceinline__ void dropout_bits_q(keep_bits<RT> &b, const dropout_key &d, int bh, int q0, int k0) {
  dropout_bits_q_lane<RT>(b, d, bh, q0, k0, laneid());
}
template <typename RT, bool ROLLED = false>
__device__ __forceinline__ void dropout_bits_k(keep_bits<RT> &b, const dropout_key &d, int bh, int key0, int q0) {
  dropout_bits_k_lane<RT, ROLLED>(b, d, bh, key0, q0, laneid());
}

// Keep flags of the lane's elements of a 16-key slice of an S tile (rows = queries q0 + r, R = 16 HEIGHT rows,
// q0 % R == 0; cols = keys k0.., k0 % 16 == 0; row_l): f(i, k, e, keep) for pair element e of data[k] of row
// fragment i, straight from the two groups' words (no keep_bits), two elements per word (dropout_keep_pair,
// thr16 = threshold << 16). The forward applies them to its fp32 P slice right before the slice's mma.
// (Hoisting the rounds that do not depend on the key, as the dK / dV kernel does for its fixed keys, saved
// ~1 % of the forward's instructions here, not worth its 4 live registers: with them the kernel spilled.)
template <int HEIGHT, typename F>
__host__ __device__ __forceinline__ void dropout_slice_q_lane(const dropout_key &d, int bh, int q0, int k0, uint32_t thr16,
                                                              int lane, F &&f) {
  static_assert(HEIGHT == 1 || HEIGHT == 2, "dropout_slice_q: 16 or 32 query rows");
  const int g = lane >> 2, t = lane & 3;
  const int qw = HEIGHT == 2 ? 0 : (q0 >> 3) & 2;
#pragma unroll
  for (int e = 0; e < 2; e++) {
    const philox4 r = dropout_group(d, bh, q0 + g, k0 + 2 * t + e);
#pragma unroll
    for (int i = 0; i < HEIGHT; i++)
#pragma unroll
      for (int kl = 0; kl < 2; kl++) {
        // row 16 i + g + 8 kl: word qw + 2 i + kl; cols 2 t + e (+ 8): its low (high) half, pair kl (kl + 2)
        bool lo, hi;
        dropout_keep_pair(philox_word(r, qw + 2 * i + kl), thr16, lo, hi);
        f(i, kl, e, lo);
        f(i, kl + 2, e, hi);
      }
  }
}

// ---- The Hopper forward (hopper_forward.cu): S in wgmma accumulator layout ----
// A consumer warpgroup's S tile is 64 queries x 128 keys: warp w holds rows 16 w + g + 8 h (h = 0, 1) and
// columns 8 n + 2 t + e (n = 0 .. 15, e = 0, 1) in accumulator register 4 n + 2 h + e (warpgroup/mma.cuh,
// g = lane / 4, t = lane % 4). A group spans rows q + {0, 8, 16, 24} of a 32-row block, so it is split
// between warps 2 u (its words 0, 1: rows g, g + 8) and 2 u + 1 (words 2, 3: rows g + 16, g + 24) of the
// same lane, which share its counter. Hence each warp of such a pair draws the groups of one half of the
// tile's keys and hands the bits of its partner's rows over (shared memory, the kernel's business): 8
// Philox calls per lane per 128-key tile, no word wasted.
// dropout_bits_wg_lane: the keep bits of the 32 rows q0 .. q0 + 31 (q0 % 32 == 0) and keys k0 .. k0 + 63
// (k0 % 16 == 0) that lane `lane` of the two warps holds: bit 4 n + 2 h + e of lo (hi) is element
// (q0 + g + 8 h (+ 16), k0 + 8 n + 2 t + e), n = 0 .. 7: the accumulator register index of that element
// (n + 8 for the tile's second 64 keys), so the kernel applies bit i to register i directly.
__host__ __device__ __forceinline__ void dropout_bits_wg_lane(const dropout_key &d, int bh, int q0, int k0,
                                                              uint32_t thr16, int lane, uint32_t &lo, uint32_t &hi) {
  const int g = lane >> 2, t = lane & 3;
  lo = hi = 0;
#pragma unroll
  for (int jj = 0; jj < 4; jj++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const philox4 r = dropout_group(d, bh, q0 + g, k0 + 16 * jj + 2 * t + e);
#pragma unroll
      for (int h = 0; h < 2; h++) {
        // row g + 8 h (+ 16): word h (2 + h); its low / high half: column 16 jj + 2 t + e (+ 8), n = 2 jj (+ 1)
        const int b0 = 4 * (2 * jj) + 2 * h + e, b1 = b0 + 4;
        bool k_lo, k_hi;
        dropout_keep_pair(philox_word(r, h), thr16, k_lo, k_hi);
        lo |= uint32_t(k_lo) << b0 | uint32_t(k_hi) << b1;
        dropout_keep_pair(philox_word(r, 2 + h), thr16, k_lo, k_hi);
        hi |= uint32_t(k_lo) << b0 | uint32_t(k_hi) << b1;
      }
    }
}

// ---- The transposed dK / dV kernel: raw Philox words, first three rounds hoisted ----
// That kernel's warp owns 16 keys for its whole run, so in its 16-key S^T tiles a lane's groups all
// have the same counter words 0 (its key row key0 + g), 2 (bh) and 3 (the offset); only word 1 (the
// query) differs between them. Through the first three Philox rounds that leaves five 32-bit values
// that depend on the lane's key row alone (dropout_prefix_k, computed once per kernel), and a group
// costs two 32 x 32 -> 64-bit products there instead of six (dropout_group_k):
//     round 0: (h0, l0) = M0 c0, (h1, l1) = M1 bh         both fixed    -> x1 = c1 ^ a
//     round 1: M0 x1 varies (-> z2 = hi ^ b, w2 = lo), M1 z1 fixed       -> x2, y2 fixed
//     round 2: M0 x2 fixed (-> e, f), M1 z2 varies                       -> (hi ^ c, lo, w2 ^ e, f)
// and rounds 3 .. 6 as usual (philox4x32_from<3, 7>): bitwise the same words as dropout_group.
// The words are kept raw (keep_words: 4 per group, 16 registers for a 16 x 64 tile; the compiler
// kept them raw from the packed keep_bits too) and tested where they are applied, both 16-bit halves
// of a word together (dropout_keep_pair).
struct philox_k_prefix {
  uint32_t a, b, c, e, f;
};
__host__ __device__ __forceinline__ philox_k_prefix dropout_prefix_k(const dropout_key &d, int bh, int key) {
  constexpr uint32_t M0 = detail::PHILOX_M0, M1 = detail::PHILOX_M1, W0 = detail::PHILOX_W0, W1 = detail::PHILOX_W1;
  const uint32_t c0 = uint32_t(key >> 4) << 3 | uint32_t(key & 7);
  const uint64_t p0 = uint64_t(M0) * c0, p1 = uint64_t(M1) * uint32_t(bh);
  const uint32_t z1 = uint32_t(p0 >> 32) ^ d.c3 ^ d.k1;                       // round 0
  const uint64_t q1 = uint64_t(M1) * z1;                                      // round 1
  const uint32_t x2 = uint32_t(q1 >> 32) ^ uint32_t(p1) ^ (d.k0 + W0);
  const uint64_t q0 = uint64_t(M0) * x2;                                      // round 2
  return {uint32_t(p1 >> 32) ^ d.k0, uint32_t(p0) ^ (d.k1 + W1), uint32_t(q1) ^ (d.k0 + 2 * W0),
          uint32_t(q0 >> 32) ^ (d.k1 + 2 * W1), uint32_t(q0)};
}
// The group of counter word 1 = c1 (dropout_counter) for the key row of prefix pr: dropout_group's words.
__host__ __device__ __forceinline__ philox4 dropout_group_k(const philox_k_prefix &pr, const dropout_key &d, uint32_t c1) {
  constexpr uint32_t M0 = detail::PHILOX_M0, M1 = detail::PHILOX_M1;
  const uint64_t p0 = uint64_t(M0) * (c1 ^ pr.a);                              // round 1
  const uint64_t p1 = uint64_t(M1) * (uint32_t(p0 >> 32) ^ pr.b);              // round 2
  return philox4x32_from<3, DROPOUT_ROUNDS>({uint32_t(p1 >> 32) ^ pr.c, uint32_t(p1), uint32_t(p0) ^ pr.e, pr.f}, d.k0, d.k1);
}

// The groups of a 16-key S^T tile RT (16 x C, C = 16 or a multiple of 32 queries; see dropout_bits_k for the
// shapes) come in QG columns of 32 queries jp, two per lane each (pair element e); their words are kept raw.
template <typename RT>
struct keep_words {
  static_assert(RT::is_row && RT::rows == 16 && (RT::cols == 16 || RT::cols % 32 == 0),
                "keep_words: row_l S^T tiles of 16 keys x 16 or 32n queries");
  static constexpr int QG = RT::cols == 16 ? 1 : RT::cols / 32;  // groups of 32 queries
  static constexpr int JJ = RT::cols == 16 ? 1 : 2;              // 16-column fragments per group
  philox4 r[QG][2];                                              // [jp][e]
};
// The two groups (e = 0, 1) of query column jp of a tile of queries q0.. (q0 % 32 == 0, or q0 % 16 == 0
// when C = 16) for the lane's key row (prefix pr).
__host__ __device__ __forceinline__ void dropout_words_k_col(philox4 (&r)[2], const dropout_key &d,
                                                             const philox_k_prefix &pr, int q0, int jp, int lane) {
#pragma unroll
  for (int e = 0; e < 2; e++) {
    const int q = q0 + 32 * jp + 2 * (lane & 3) + e;
    r[e] = dropout_group_k(pr, d, 0x80000000u | uint32_t(q >> 5) << 3 | uint32_t(q & 7));
  }
}
template <typename RT>
__host__ __device__ __forceinline__ void dropout_words_k_lane(keep_words<RT> &kw, const dropout_key &d,
                                                              const philox_k_prefix &pr, int q0, int lane) {
#pragma unroll
  for (int jp = 0; jp < keep_words<RT>::QG; jp++) dropout_words_k_col(kw.r[jp], d, pr, q0, jp, lane);
}
// The word of column group jp's groups r that holds elements (j = jp JJ + jj, k = 2 kh + s, e) of the tile,
// s = 0 / 1 its low / high half: row g + 8 s (half s), col 16 j + 2 t + e + 8 kh (word qw + 2 jj + kh;
// qw = (q0 >> 3) & 2 when C = 16, else 0).
__host__ __device__ __forceinline__ uint32_t keep_word(const philox4 (&r)[2], int jj, int kh, int e, int qw) {
  return philox_word(r[e], qw + 2 * jj + kh);
}

// The keep bits (keep_bits / keep_bit order) of a 16-key S^T tile RT (queries q0.., as dropout_bits_k) from the
// lane's key-row prefix pr: dropout_words_k_col's words (rounds 0-2 hoisted), tested two elements per word
// (dropout_keep_pair, thr16 = threshold << 16). For the Hopper backward (hopper_backward.cu), whose wgmma
// accumulator holds a warp's 16-key x 64-query S^T slice in this very order (register 8 j + 2 k + e is
// pair element e of pair k of 16-column fragment j: rows g + 8 (k & 1), cols 16 j + 8 (k >> 1) + 2 t + e),
// so bit i of the one word of keep_bits<rt<float, 16, 64>> belongs to accumulator register i.
// key_first (causal: the warp's first key): the query groups whose last query is before it hold only elements the
// causal mask removes (key > query), so their Philox calls are skipped and their bits left 0 (a warp-uniform
// test; INT_MIN draws everything). Measured (H100, session 29, bench_attention_dropout.py --graphs, p = 0.2, two
// runs each, alternated): fwd + bwd dropout overhead +35.6% -> +32.8% at (16,12,1024,64) causal, +13.3% -> +6.9%
// at (64,6,256,64); the backward alone 0.363 -> 0.351 ms and 0.119 -> 0.110 ms.
template <typename RT>
__host__ __device__ __forceinline__ void dropout_bits_k_prefix_lane(keep_bits<RT> &b, const dropout_key &d,
                                                                    const philox_k_prefix &pr, int q0, uint32_t thr16,
                                                                    int lane, int key_first = INT_MIN) {
  constexpr int JJ = keep_words<RT>::JJ;
  constexpr int GROUP_Q = RT::cols == 16 ? 16 : 32;  // queries of a column group
  const int qw = RT::cols == 16 ? (q0 >> 3) & 2 : 0;
#pragma unroll
  for (int x = 0; x < (b.n + 31) / 32; x++) b.w[x] = 0;
#pragma unroll
  for (int jp = 0; jp < keep_words<RT>::QG; jp++) {
    if (key_first > q0 + GROUP_Q * jp + GROUP_Q - 1) continue;
    philox4 r[2];
    dropout_words_k_col(r, d, pr, q0, jp, lane);
#pragma unroll
    for (int jj = 0; jj < JJ; jj++)
#pragma unroll
      for (int kh = 0; kh < 2; kh++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
          bool keep[2];
          dropout_keep_pair(keep_word(r, jj, kh, e, qw), thr16, keep[0], keep[1]);
#pragma unroll
          for (int s = 0; s < 2; s++) b.set(keep_bit<RT>(0, jp * JJ + jj, 2 * kh + s, e), keep[s]);
        }
  }
}

// The dK / dV kernel's element work with dropout, in place on P^T (p) and dP^T (ds) of the lane's key row
// (prefix pr), queries q0.., with delta_s = (1 - p) delta:
//     p  <- P~ = keep ? P : 0                            (dV's operand; dV is scaled by 1 / (1 - p) at the end)
//     ds <- dS' = P~ dP - P delta_s = (1 - p) dS         (dS = P o (keep dP / (1 - p) - delta); dK and dQ are
//                                                         scaled by 1 / (1 - p) at the end)
// One select, one multiply and one fma per element (p = 0: a subtract and a multiply), half a keep test.
// The words are drawn one column group at a time, right before they are used (8 live, not 16).
template <typename RT>
__device__ __forceinline__ void dropout_bwd_k(RT &p, RT &ds, const dropout_key &d, const philox_k_prefix &pr, int q0,
                                              uint32_t thr16, const row_vec<RT::cols> &delta_s) {
  constexpr int JJ = keep_words<RT>::JJ;
  const int qw = RT::cols == 16 ? (q0 >> 3) & 2 : 0;
#pragma unroll
  for (int jp = 0; jp < keep_words<RT>::QG; jp++) {
    philox4 r[2];
    dropout_words_k_col(r, d, pr, q0, jp, laneid());
#pragma unroll
    for (int jj = 0; jj < JJ; jj++)
#pragma unroll
      for (int kh = 0; kh < 2; kh++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
          const int j = jp * JJ + jj;
          bool keep[2];
          dropout_keep_pair(keep_word(r, jj, kh, e, qw), thr16, keep[0], keep[1]);
          const float c = e ? delta_s.data[j][kh].y : delta_s.data[j][kh].x;
#pragma unroll
          for (int s = 0; s < 2; s++) {
            float &pe = e ? p.tiles[0][j][2 * kh + s].y : p.tiles[0][j][2 * kh + s].x;
            float &de = e ? ds.tiles[0][j][2 * kh + s].y : ds.tiles[0][j][2 * kh + s].x;
            const float pd = pe * c;
            pe = keep[s] ? pe : 0.f;
            de = fmaf(pe, de, -pd);
          }
        }
  }
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
