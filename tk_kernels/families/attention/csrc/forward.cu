// Flash attention forward (sm_80+, mma.sync tensor cores), written with the tk tile DSL.
//
//   O = softmax(scale * Q K^T [+ causal mask]) V,   lse_i = log sum_j exp(scale * q_i . k_j)
//   Q, K, V, O: (B, H, T, D) with D in {64, 128}, stride 1 along D, any b/h/t strides; lse: (B, H, T) fp32.
//
// Algorithm (FlashAttention-2 style, one pass, online softmax in base 2):
//   A CTA of 4 warps owns a BLOCK_M = 128-row block of queries of one (b, h); warp w owns rows
//   [32w, 32w + 32). The CTA walks the keys in tiles of BLOCK_N = 128 (D = 64) or 64 (D = 128):
//       S   = Q K_j^T                         (raw scores, fp32 accumulators, 32 x BLOCK_N per warp)
//       m'  = max(m, rowmax(S))               (running row max, raw units)
//       if some row's max grew:  l *= 2^((m - m') c), O *= 2^((m - m') c), m = m'
//       P   = 2^(S * c - m * c)               c = scale * log2(e): the scale is folded into the exponent
//       l  += rowsum(P)                       O += P V_j
//   and finishes with O / l and lse = (m c + log2 l) * ln 2. The rescale is skipped for the whole
//   warp when no row's max grew. Measured and removed: FlashAttention-4's lazy rescale (m may lag the
//   max by a threshold, exact in real arithmetic): a row's dominant P is then 2^x rather than exactly 1
//   when rounded to 16 bits, and on peaky rows (large scale) that measured 1.5-1.9x SDPA's worst-row
//   error on the H200, so m always tracks the max, as in FlashAttention-2.
//   P goes from the fp32 accumulator straight into the A operand of P V_j (the m16n8k16 C layout,
//   packed pairwise to 16 bits, IS the A layout), so P never touches shared memory.
//
// Tiling and data movement:
//   * Q block (128 x D) is loaded once with cp.async and stays in shared memory; each warp re-reads
//     its 32 rows with ldmatrix per key tile (registers go to the 32 x BLOCK_N scores and the
//     32 x D fp32 O accumulator; keeping Q in registers measured slower on H200).
//   * K_j and V_j (BLOCK_N x D each) live in swizzled shared tiles (conflict-free cp.async/ldmatrix),
//     double-buffered: K_{j+1} and V_{j+1} are fetched while tile j is computed. One __syncthreads per
//     key tile, so within a tile the warps drift freely (one warp's softmax overlaps another's mma).
//   * K is read with ldmatrix (row layout = B operand of Q K^T); V with ldmatrix.trans (col layout =
//     B operand of P V).
//   * Causal (top-left aligned, key j visible to query i iff j <= i): the key loop stops at the tile
//     holding the block's last row; the element mask is applied only on tiles that cross a warp's
//     diagonal; a warp whose 32 rows all precede the tile skips its math. The heaviest (last) query
//     blocks of all heads are launched first (reverse block order, block index slowest), so the
//     grid's last wave holds only light blocks.
//   * Ragged T: rows >= T are zero-filled on load and never stored; keys >= T are masked to -inf.
//     The first key tile holds key 0, which every row sees, so the running max is finite after it
//     (the exponent offset is still guarded against -inf).
//   * O is staged through the warp's own rows of the Q tile and written with 16-byte stores.
//   * Tiling per head dim (fwd_config): 128 x 128 tiles at D = 64, 128 x 64 at D = 128, 4 warps of 32
//     rows, 2 CTAs per SM (<= 255 registers). They won an H200 sweep of the alternatives (D = 64: 128 x 128
//     tiles beat 128 x 64 with Q in registers by 5-8%; 8 warps of 16 rows lost by ~15%). Those variants
//     were TK_FWD_* macros until commit 1674171 (git history).
//   * Shared memory: D = 64 82,048 B, D = 128 98,432 B; both fit the 101,376 B per block of 99 KB GPUs
//     (sm_86 / sm_89), so the forward has a single configuration per head dim.
// Dropout (the DROPOUT = true kernels; p = 0 runs the kernels above, unchanged): after the row sum,
//       P~ = P o keep (dropout.cuh: the keep flags of (seed, offset, bh, row, key), drawn per 16-key
//       slice right before its P V mma),   O += P~ V_j,   and at the end O *= 1 / ((1 - p) l).
//   m, l and lse are those of the softmax before dropout (the backward recomputes P from lse and
//   regenerates the same mask). CTA 0 writes the (seed, offset) it used (rng_out).
//   Same tiles as p = 0 (128 keys at D = 64). Per slice: its two Philox calls, each word tested for both
//   its 16-bit halves (dropout_slice_q_lane, dropout_keep_pair: no packed keep bits), one select per
//   element on the fp32 P slice, then the slice's conversion to 16 bits and its mma (the same 16-bit P~
//   as zeroing the converted P, so O is bitwise what the keep_bits version gave).
//   SASS per 128-key tile, D = 64 causal bf16 sm_90a: 2631 instructions (p = 0: 1552); the keep_bits
//   version before it (two calls in a rolled loop, bits packed then unpacked on the 16-bit P) 3273, the
//   64-key tiles before that ~2x the p = 0 count per key.
//   At 255 registers (ptxas -v, sm_80 and sm_90a, no spills in any of the 8 dropout instantiations) this
//   needs: the CTA's Philox key, bh, b, h, its first query row and the loop's trip count in shared memory
//   (fwd_drop, re-read after each tile's barrier, so none of them, nor the Philox round keys or counter
//   words derived from them, is held across the loop: held in registers, the trip count, then the warp's
//   first row, then the lane's counter word each spilled 8-12 bytes in some instantiation); the K / V
//   prefetch addressed from the kernel arguments (no head pointers held across the loop). (The 16-bit P
//   variant of the flag version, masks per 16-bit pair, spilled up to 40 bytes; hoisting the Philox rounds
//   that do not depend on the key saved ~1% and spilled.)
//   Overhead (bench/bench_attention_dropout.py, causal fwd+bwd, p = 0.2 vs 0, H200; bench/RESULTS.md):
//   +63.6% at (16,12,1024,64) with the earlier 64-key tiles ("kernel families after issues 9/10"); with
//   these 128-key tiles, portable forward + backward, 0.449 -> 0.561 ms (+24.9%) at (16,12,1024,64) and
//   0.180 -> 0.180 ms (+0.3%) at (64,6,256,64) (session 5, calls 3-4). Session 3 (call 4) had measured
//   +0.2% / -12.1% there, when the p = 0 backward ran a slower configuration than the p = 0.2 one (its
//   caveat). Forward alone 0.107 -> 0.162 ms at (16,12,1024,64) (session 3, call 4).
// Measured (H200, bf16, bench/RESULTS.md, "attention ... commit 2071b28"): 1.04-1.25x SDPA flash at the 14
// forward configurations (D = 64: 1.11-1.25x, D = 128: 1.04-1.17x, the top at (1,16,16384,128) causal).
// On sm_90 the default forward is hopper_forward.cu (ops.forward_path); this kernel is the A100 / RTX-class
// path (and TK_ATTENTION_PATH=portable). No spills on sm_80 and sm_90a.
#include <cmath>

#include "attention.h"
#include "dropout.cuh"
#include "tk.cuh"

namespace tk_attn {
namespace {

using namespace tk;

constexpr int BLOCK_M = 128;                      // query rows per CTA
constexpr int FWD_WARPS = 4;                      // 32 query rows per warp

// Keys per tile and CTAs per SM (the register budget: 2 -> <= 255 registers) per head dim; the dropout
// kernels (DROPOUT) use the same tiles (see the header for what keeps them spill-free at D = 64).
template <int D, bool DROPOUT = false> struct fwd_config;
template <bool DROPOUT> struct fwd_config<64, DROPOUT> {
  static constexpr int block_n = 128;
  static constexpr int min_blocks = 2;
};
template <bool DROPOUT> struct fwd_config<128, DROPOUT> {
  static constexpr int block_n = 64;
  static constexpr int min_blocks = 2;
};

template <typename T, int D, bool DROPOUT = false>
struct fwd_smem {
  using q_tile = st<T, BLOCK_M, D>;
  using kv_tile = st<T, fwd_config<D, DROPOUT>::block_n, D>;
  static constexpr int bytes = shared_bytes<q_tile, kv_tile, kv_tile, kv_tile, kv_tile>();
};

template <typename T>
struct fwd_args {
  gl<T> q, k, v, o;
  float *lse;
  int seq;             // T
  int heads;           // H
  int batch;           // B
  float scale_log2;    // softmax scale * log2(e)
};
// The dropout kernels' arguments: the same plus the dropout's (the p = 0 kernels keep fwd_args).
template <typename T>
struct fwd_dropout_args : fwd_args<T> {
  dropout_args drop;
};
template <typename T, bool DROPOUT> using fwd_args_t = std::conditional_t<DROPOUT, fwd_dropout_args<T>, fwd_args<T>>;

// Which (query block, b, h) this CTA handles. Non-causal: the query blocks of one head are adjacent
// (they share K/V through L2). Causal: query block slowest and reversed, so all heads' heaviest
// blocks start first and the grid's last wave holds only the lightest ones (longest-first scheduling).
struct block_coord {
  int mb, b, h;
};
template <bool CAUSAL, typename T>
__device__ __forceinline__ block_coord block_coords(const fwd_args<T> &a) {
  const int n_mblocks = (a.seq + BLOCK_M - 1) / BLOCK_M;
  const int n_heads = a.heads * a.batch;
  const int idx = blockIdx.x;
  const int mb = CAUSAL ? n_mblocks - 1 - idx / n_heads : idx % n_mblocks;
  const int bh = CAUSAL ? idx % n_heads : idx / n_mblocks;
  return {mb, bh / a.heads, bh % a.heads};
}

constexpr int FWD_THREADS = FWD_WARPS * WARP_THREADS;

// The dropout key of a DROPOUT kernel's CTA, in (static) shared memory: written once, re-read after each
// key tile's barrier, so the compiler cannot keep it (and the Philox round keys derived from it) live in
// registers across the S = Q K^T phase.
struct fwd_dropout {
  dropout_key key;
  int bh, b, h;
  int n_tiles;  // the key loop's trip count (read after the loop's barrier: in a register it spilled)
  int m0;       // the CTA's first query row: the Philox prefix's rows are derived from it per tile (a
                // register-held counter word hoisted out of the loop spilled at D = 128)
};
__shared__ fwd_dropout fwd_drop;

template <typename T, int D, bool CAUSAL, bool DROPOUT>
__global__ void __launch_bounds__(FWD_THREADS, fwd_config<D, DROPOUT>::min_blocks)
attention_fwd_kernel(const __grid_constant__ fwd_args_t<T, DROPOUT> a) {
  using cfg = fwd_config<D, DROPOUT>;
  constexpr int BLOCK_N = cfg::block_n;
  constexpr int NUM_THREADS = FWD_THREADS;
  constexpr int WARP_M = BLOCK_M / FWD_WARPS;        // query rows per warp
  using q_tile = typename fwd_smem<T, D, DROPOUT>::q_tile;
  using kv_tile = typename fwd_smem<T, D, DROPOUT>::kv_tile;

  extern __shared__ __align__(128) char smem[];
  shared_allocator al(smem);
  q_tile &sQ = al.allocate<q_tile>();
  kv_tile(&sK)[2] = al.allocate<kv_tile[2]>();
  kv_tile(&sV)[2] = al.allocate<kv_tile[2]>();

  const int T_ = a.seq;
  const auto [mb, b, h] = block_coords<CAUSAL>(a);
  const int m0 = mb * BLOCK_M;                        // first query row of the CTA
  const int w = warpid();
  const int r0_cta = m0 + w * WARP_M;                 // first query row of this warp
  const int rows_seen = CAUSAL ? min(m0 + BLOCK_M, T_) : T_;
  const int n_tiles = (rows_seen + BLOCK_N - 1) / BLOCK_N;

  const gl<T> q_g = a.q.matrix(b, h), k_g = a.k.matrix(b, h), v_g = a.v.matrix(b, h);

  // Prologue: one group {Q, K_0, V_0}.
  load_async<NUM_THREADS>(sQ, q_g, {0, 0, m0, 0});
  load_async<NUM_THREADS>(sK[0], k_g, {0, 0, 0, 0});
  load_async<NUM_THREADS>(sV[0], v_g, {0, 0, 0, 0});
  commit_group();

  rt<float, WARP_M, D> o;                             // output accumulator
  col_vec<WARP_M> m, l;                               // running max (raw score units), running sum
  zero(o);
  neg_infty(m);
  zero(l);
  if constexpr (DROPOUT) {
    if (threadIdx.x == 0) {                           // visible after the key loop's first barrier
      uint64_t seed, offset;
      fwd_drop = {load_dropout_key(a.drop.rng, a.drop.threshold, seed, offset), b * a.heads + h, b, h, n_tiles, m0};
      if (blockIdx.x == 0 && a.drop.rng_out != nullptr) {
        a.drop.rng_out[0] = int64_t(seed);
        a.drop.rng_out[1] = int64_t(offset);
      }
    }
  }

  // (DROPOUT: the trip count from shared memory, written before the loop and visible after its first
  // barrier; the first iteration always runs: n_tiles >= 1.)
  for (int j = 0; DROPOUT ? (j == 0 || j < fwd_drop.n_tiles) : j < n_tiles; j++) {
    const int n0 = j * BLOCK_N;
    const int stage = j & 1;

    // K_j and V_j have landed for every thread, and every warp is done with tile j-1, so the other
    // stage is free: prefetch K_{j+1}, V_{j+1} into it while this tile is computed. One barrier per tile.
    wait_group<0>();
    __syncthreads();
    if (j + 1 < (DROPOUT ? fwd_drop.n_tiles : n_tiles)) {
      if constexpr (DROPOUT) {  // addressed from the kernel arguments: two fewer 64-bit pointers live in the loop
        load_async<NUM_THREADS>(sK[stage ^ 1], a.k, {fwd_drop.b, fwd_drop.h, n0 + BLOCK_N, 0});
        load_async<NUM_THREADS>(sV[stage ^ 1], a.v, {fwd_drop.b, fwd_drop.h, n0 + BLOCK_N, 0});
      } else {
        load_async<NUM_THREADS>(sK[stage ^ 1], k_g, {0, 0, n0 + BLOCK_N, 0});
        load_async<NUM_THREADS>(sV[stage ^ 1], v_g, {0, 0, n0 + BLOCK_N, 0});
      }
    }
    commit_group();                                   // (possibly empty) group {K_{j+1}, V_{j+1}}

    // (DROPOUT: this warp's first row re-derived from shared memory each tile, not held across the loop)
    const int r0 = DROPOUT ? fwd_drop.m0 + w * WARP_M : r0_cta;
    const bool warp_active = !CAUSAL || n0 <= r0 + WARP_M - 1;  // some key of the tile visible to some row

    if (warp_active) {
      // S = Q K_j^T, one 16-wide slice of D at a time.
      rt<float, WARP_M, BLOCK_N> s;
      zero(s);
#pragma unroll
      for (int kk = 0; kk < D / 16; kk++) {
        rt<T, BLOCK_N, 16> k_frag;
        load_B(k_frag, subtile<BLOCK_N, 16>(sK[stage], 0, kk));
        rt<T, WARP_M, 16> q_frag;
        load(q_frag, subtile<WARP_M, 16>(sQ, w, kk));
        mma_ABt(s, q_frag, k_frag, s);
      }
      if (CAUSAL && n0 + BLOCK_N - 1 > r0) make_causal(s, r0, n0);
      // Keys >= T: for causal, every row < T already masks them (key > row); rows >= T are never stored.
      if (!CAUSAL && n0 + BLOCK_N > T_) mask_cols(s, n0, T_);

      // Online softmax (base 2): m tracks the row max exactly; tiles where no row's max grew skip
      // the O rescale for the whole warp. (The comparison is written in scaled units, (m' - m) c > 0,
      // the form a lazy-rescale threshold would take; see the header for why the threshold is 0.)
      col_vec<WARP_M> m_new, m_scaled, p_sum;
      row_max(m_new, s, m);
      const float c = a.scale_log2;
      if (warp_any(any_of(m_new, m, [c](float mn, float mo) { return (mn - mo) * c > 0.f; }))) {
        col_vec<WARP_M> alpha;                        // 2^((m - m') c); 0 on the first tile (m = -inf)
        binary_map(alpha, m, m_new, [c](float mo, float mn) {
          return mn == neg_infty() ? 1.f : fast_exp2(mo * c - mn * c);
        });
        mul(l, l, alpha);
        mul_row(o, o, alpha);
        copy(m, m_new);
      }
      unary_map(m_scaled, m, [c](float x) { return x == neg_infty() ? 0.f : x * c; });
      mul(s, s, c);
      sub_row(s, s, m_scaled);
      exp2(s, s);                                     // P = 2^(S c - m c), masked entries -> 0
      row_sum(p_sum, s);
      add(l, l, p_sum);

      if constexpr (DROPOUT) {
        // O += P~ V_j, one 16-key slice at a time: dropout after the row sum (l and lse are those of the
        // undropped softmax), on the fp32 P slice (one select per element, the keep flags straight from
        // the slice's two Philox calls), then the slice's conversion to 16 bits and its mma; 1 / (1 - p)
        // is applied with 1 / l at the end. (The same 16-bit P~ as zeroing the converted P: bitwise the
        // same O.)
        const dropout_key dk = fwd_drop.key;
        const uint32_t thr16 = dk.threshold << 16;
        const int bh = fwd_drop.bh;
#pragma unroll
        for (int kk = 0; kk < BLOCK_N / 16; kk++) {
          rt<T, 16, D, col_l> v_frag;
          load_B(v_frag, subtile<16, D>(sV[stage], kk, 0));
          dropout_slice_q_lane<WARP_M / 16>(dk, bh, r0, n0 + 16 * kk, thr16, laneid(),
                                            [&](int i, int k, int e, bool keep) {
                                              float &x = e ? s.tiles[i][kk][k].y : s.tiles[i][kk][k].x;
                                              x = keep ? x : 0.f;
                                            });
          rt<T, WARP_M, 16> p_kk;
          copy(p_kk, col_slice<16>(s, kk));
          mma_AB(o, p_kk, v_frag, o);
        }
      } else {
        rt<T, WARP_M, BLOCK_N> p;
        copy(p, s);                                   // fp32 accumulator -> 16-bit A operand

        // O += P V_j, one 16-key slice at a time.
#pragma unroll
        for (int kk = 0; kk < BLOCK_N / 16; kk++) {
          rt<T, 16, D, col_l> v_frag;
          load_B(v_frag, subtile<16, D>(sV[stage], kk, 0));
          mma_AB(o, col_slice<16>(p, kk), v_frag, o);
        }
      }
    }
  }
  wait_group<0>();  // nothing useful is in flight (only empty groups), but leave no copy behind

  // Epilogue: O /= l, lse = (m c + log2 l) ln 2; rows >= T are not written.
  col_vec<WARP_M> inv_l, lse;
  if constexpr (DROPOUT) unary_map(inv_l, l, [ks = a.drop.keep_scale](float x) { return ks / x; });
  else unary_map(inv_l, l, [](float x) { return 1.f / x; });
  mul_row(o, o, inv_l);
  log2(lse, l);
  binary_map(lse, lse, m, [c = a.scale_log2](float lg, float mx) { return (mx * c + lg) * LN2; });
  // The block coordinates are re-derived here rather than kept live across the key loop (register budget).
  const auto [mb_e, b_e, h_e] = block_coords<CAUSAL>(a);
  const int w_e = warpid(), r0_e = mb_e * BLOCK_M + w_e * WARP_M;
  float *lse_row = a.lse + (int64_t(b_e) * a.heads + h_e) * T_;
  if (r0_e < T_) store(lse_row + r0_e, lse, T_ - r0_e);

  // Stage O (16-bit) in this warp's own rows of the Q tile, then 16-byte coalesced stores.
  auto o_stage = subtile<WARP_M, D>(sQ, w_e, 0);
  __syncwarp();  // this warp's last ldmatrix reads of its Q rows precede the overwrite
  store(o_stage, o);
  __syncwarp();
  store<WARP_THREADS>(a.o, o_stage, {b_e, h_e, r0_e, 0});
}

template <typename T, int D, bool CAUSAL, bool DROPOUT>
cudaError_t launch(const FwdParams &p, cudaStream_t stream) {
  fwd_args_t<T, DROPOUT> a;
  const auto make_gl = [&](const void *ptr, const Strides &s) {
    return gl<T>{static_cast<T *>(const_cast<void *>(ptr)), {p.B, p.H, p.T, p.D}, {s.b, s.h, s.t}};
  };
  a.q = make_gl(p.q, p.q_s);
  a.k = make_gl(p.k, p.k_s);
  a.v = make_gl(p.v, p.v_s);
  a.o = make_gl(p.o, p.o_s);
  a.lse = p.lse;
  a.seq = p.T;
  a.heads = p.H;
  a.batch = p.B;
  a.scale_log2 = p.scale * LOG2E;
  if constexpr (DROPOUT) {
    a.drop.rng = p.rng;
    a.drop.threshold = dropout_threshold(p.dropout_p);
    a.drop.keep_scale = 1.f / (1.f - p.dropout_p);
    a.drop.rng_out = p.rng_state;
  }

  constexpr int smem_bytes = fwd_smem<T, D, DROPOUT>::bytes;
  auto kernel = attention_fwd_kernel<T, D, CAUSAL, DROPOUT>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (err != cudaSuccess) return err;
  const int64_t n_blocks = int64_t((p.T + BLOCK_M - 1) / BLOCK_M) * p.H * p.B;
  if (n_blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid{unsigned(n_blocks)};
  kernel<<<grid, FWD_THREADS, smem_bytes, stream>>>(a);
  return cudaGetLastError();
}

template <typename T, bool DROPOUT>
cudaError_t dispatch(const FwdParams &p, cudaStream_t stream) {
  if (p.D == 64) return p.causal ? launch<T, 64, true, DROPOUT>(p, stream) : launch<T, 64, false, DROPOUT>(p, stream);
  if (p.D == 128) return p.causal ? launch<T, 128, true, DROPOUT>(p, stream) : launch<T, 128, false, DROPOUT>(p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace

int attention_forward_min_smem_bytes() {
  constexpr int d64 = fwd_smem<bf16, 64>::bytes, d128 = fwd_smem<bf16, 128>::bytes;
  return d64 > d128 ? d64 : d128;
}

cudaError_t attention_forward(const FwdParams &p, cudaStream_t stream) {
  if (p.B < 1 || p.H < 1 || p.T < 1) return cudaErrorInvalidValue;
  // The running max is taken on raw scores and the scale folded into exp2, which needs scale > 0.
  if (!(p.scale > 0.f) || !std::isfinite(p.scale)) return cudaErrorInvalidValue;
  if (!(p.dropout_p >= 0.f && p.dropout_p < 1.f)) return cudaErrorInvalidValue;
  const bool drop = p.dropout_p > 0.f;
  if (drop && p.rng_state == nullptr) return cudaErrorInvalidValue;
  if (p.dtype == DType::bf16) return drop ? dispatch<bf16, true>(p, stream) : dispatch<bf16, false>(p, stream);
  if (p.dtype == DType::fp16) return drop ? dispatch<half, true>(p, stream) : dispatch<half, false>(p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace tk_attn
