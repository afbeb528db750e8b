// Attention backward: what the kernel files (backward_*.cu) and the launch table (configs.cu) share.
// The kernels' arguments (bwd_args), the tiling constants and shared-memory layouts of the dK / dV
// kernels (the launch table needs their sizes), and the device helpers both dK / dV kernels use.
// See backward.cu for the algorithm and the order of the launches.
#pragma once
#include <cstdint>

#include "attention.h"
#include "dq_accum.cuh"
#include "dropout.cuh"
#include "tk.cuh"

namespace tk_attn {

using namespace tk;

// Address arithmetic of every shared-tile load / fragment store of the backward (tk::saddr): lane_xor
// on sm_90 (measured with the other instruction-overhead choices: see the header), tile_xor on sm_80,
// where lane_xor costs an 8-byte spill in the two-barrier split kernel. (The forward uses tile_xor:
// with lane_xor its causal D = 64 kernel spills 8 bytes on sm_90a.)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr saddr BWD_ADDR = saddr::tile_xor;
#else
constexpr saddr BWD_ADDR = saddr::lane_xor;
#endif

__host__ __device__ constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }
constexpr int64_t cdiv64(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename T>
gl<T> make_gl(const BwdParams &p, const void *ptr, const Strides &s) {
  return gl<T>{static_cast<T *>(const_cast<void *>(ptr)), {p.B, p.H, p.T, p.D}, {s.b, s.h, s.t}};
}

constexpr int KV_WARPS = 8;
constexpr int KV_THREADS = KV_WARPS * WARP_THREADS;
constexpr int KV_BLOCK_N = 128;  // keys per CTA (16 per warp)

// Transposed dK / dV kernel (backward_dkdv.cu).
// block_m (queries per block; one barrier + dQ partial each) is a template parameter: dkdv_block_m runs
// where the device's opt-in shared memory fits it, dkdv_small_block_m on 99 KB parts (RTX 30xx / 40xx:
// sm_86 / sm_89); the launch table (configs) picks. D = 128 uses this kernel only in its small
// configuration (the split kernel below is faster at D = 128).
template <int D> constexpr int dkdv_block_m = D == 64 ? 128 : 64;
template <int D> constexpr int dkdv_small_block_m = D == 64 ? 64 : 16;
template <int D, int BM = dkdv_block_m<D>> struct dkdv_config;
template <int BM> struct dkdv_config<64, BM> {
  static constexpr int block_m = BM;                  // queries per block (one barrier + dQ partial each)
  static constexpr int min_blocks = 1;
  static constexpr bool kv_in_registers = true;       // the warp's 16 x 64 K / V rows stay in registers
  static constexpr int q_step = 64;                   // queries per S^T / dP^T register tile
  static constexpr int dq_warps_m = 4;                // dQ partial (block_m x 64): warp tile block_m/4 x 32
  static_assert((BM == 64 || BM == 128) && BM % q_step == 0, "D = 64: block_m must be 64 or 128");
};
template <int BM> struct dkdv_config<128, BM> {
  static constexpr int block_m = BM;    // 16 (the small configuration; 64 is the split kernel's)
  static constexpr int min_blocks = 1;
  static constexpr bool kv_in_registers = false;
  static constexpr int q_step = 32 < BM ? 32 : BM;  // S^T / dP^T tile width
  static_assert(BM == 16 || BM == 32 || BM == 64, "D = 128: block_m must be 16, 32 or 64");
  static constexpr int dq_warps_m = BM >= 32 ? 2 : 1;  // dQ partial (BM x 128): warp tile BM/2 x 32, or 16 x 16
};

// Warp tiling of a dQ partial (BM x D, contracted over the CTA's 128 keys) and its fp32 staging for the
// TMA bulk path (see dq_partial_atomic).
template <int BM, int D, int WM>
struct dq_tiling {
  static constexpr int WN = KV_WARPS / WM;  // WM x WN warp grid over the BM x D output
  static constexpr int TM = BM / WM, TN = D / WN;
  static constexpr int stage_floats = KV_WARPS * 32 * 32;  // bulk path: one 32 x 32 xor32 block per warp
};

#pragma nv_diag_suppress 177  // (bytes_bulk: only the default block_m has a bulk variant)
template <typename T, int D, int BLOCK_M = dkdv_block_m<D>>
struct dkdv_smem {
  using kv_tile = st<T, KV_BLOCK_N, D>;
  static constexpr int BM = dkdv_config<D, BLOCK_M>::block_m;
  using q_tile = st<T, BM, D>;
  using ds_tile = st<T, KV_BLOCK_N, BM>;  // dS^T: [key][query]
  using vec = sv<float, BM>;
  // Everything that is double-buffered, in one struct: buffer `stage` is then one base address
  // (stage * sizeof) plus immediates, which keeps the register count down.
  struct stage_tiles {
    q_tile q, dout;
    ds_tile dsT;
    vec lse, delta;
  };
  static constexpr int bytes = shared_bytes<kv_tile, kv_tile, stage_tiles[2]>();
  using dq_stage = float[dq_tiling<BM, D, dkdv_config<D, BLOCK_M>::dq_warps_m>::stage_floats];
  static constexpr int bytes_bulk = shared_bytes<kv_tile, kv_tile, stage_tiles[2], dq_stage>();
};
#pragma nv_diag_default 177

template <typename T>
struct bwd_args {
  gl<T> q, k, v, dout, dq, dk, dv;
  gl<float> dq_accum;     // fp32 workspace (atomic path only): B * H heads of T x D, row-major; or, when
                          // dq_xor32, heads of dq_rows x D in 32 x 32 xor32 blocks (block (i, j) at
                          // (i * D / 32 + j) * 1024 floats)
  int dq_rows;            // dq_accum_rows(T)
  bool dq_xor32;          // dq_accum layout written by the bulk dQ path
  bool dq_frag64;         // dq_accum layout written by the Hopper backward: heads of dq_rows x D, 64 x 64
                          // frag64 blocks (dq_accum.cuh) of (queries, head dims), block (i, j) (queries
                          // 64 i.., dims 64 j..) at (i * D / 64 + j) * 4096 floats
  const float *lse;       // (B, H, T) contiguous
  const float *delta;     // (B, H, T) contiguous
  float *colsum_partial;  // the dQ convert (frag64 only), optional: its CTAs' column sums of dq (qkv_bias_grad.cuh)
  int seq, heads;
  float scale;            // softmax scale
  float scale_log2;       // scale * log2(e)
  bool causal;
};
// The dropout kernels' arguments: the same plus the dropout's (the p = 0 kernels keep bwd_args).
// Their rng is the forward's rng_state, read as a captured dropout_rng (see dropout.cuh).
template <typename T>
struct bwd_dropout_args : bwd_args<T> {
  dropout_args drop;
};
template <typename T, bool DROPOUT> using bwd_args_t = std::conditional_t<DROPOUT, bwd_dropout_args<T>, bwd_args<T>>;

// The dropout key a backward CTA works with (DROPOUT kernels only; the p = 0 kernels never call it).
template <typename A>
__device__ __forceinline__ dropout_key bwd_dropout_key(const A &a) {
  uint64_t seed, offset;
  return load_dropout_key(a.drop.rng, a.drop.threshold, seed, offset);
}

// The query-side inputs of one head: Q and dO as (T, D) gls, and its lse / delta rows.
template <typename T>
struct head_inputs {
  gl<T> q, dout;
  const float *lse, *delta;
};

// Which (key block, b*h) this CTA handles. Causal: the first key blocks carry the most query blocks,
// so they are launched first (key block index slowest). Otherwise key blocks of one head are adjacent
// (they share every Q / dO tile through L2).
__device__ __forceinline__ void kv_block_coords(int n_kv_blocks, int bh_count, bool causal, int &kb, int &bh) {
  const int idx = blockIdx.x;
  if (causal) {
    kb = idx / bh_count;
    bh = idx % bh_count;
  } else {
    kb = idx % n_kv_blocks;
    bh = idx / n_kv_blocks;
  }
}

// Everything a dK / dV CTA derives from its block index: the grid's shape, its key block kb and head
// bh = b * H + h, and its first key n0.
struct kv_cta {
  int n_kv_blocks, bh_count, kb, bh, b, h, n0;
};
template <typename T>
__device__ __forceinline__ kv_cta locate_kv_cta(const bwd_args<T> &a) {
  kv_cta c;
  c.n_kv_blocks = cdiv(a.seq, KV_BLOCK_N);
  c.bh_count = a.q.shape[0] * a.heads;
  kv_block_coords(c.n_kv_blocks, c.bh_count, a.causal, c.kb, c.bh);
  c.b = c.bh / a.heads;
  c.h = c.bh % a.heads;
  c.n0 = c.kb * KV_BLOCK_N;
  return c;
}

// The order in which a CTA visits its query blocks. Without a causal mask every key block of a head
// walks the same blocks; in lock-step they would all add their dQ partials into the same dq_accum rows
// (and read the same Q / dO lines) at the same moment. So non-causal CTAs start at a block proportional
// to their key block and wrap around (measured against starting everyone at block 0 and against rotating
// causal CTAs too; variants in git history, commit 1674171). The visiting order is the same in the atomic and deterministic kernels, so dK / dV keep
// the same summation order on both paths.
struct query_block_order {
  int first, end, start;  // blocks [first, end), visited from `start`, wrapping around to `first`
  __device__ __forceinline__ query_block_order(int mb_first, int mb_end, int kb, int n_kv_blocks, bool causal)
      : first(mb_first), end(mb_end), start(mb_first) {
    if (!causal)
      start = mb_first + int(int64_t(kb) * (mb_end - mb_first) / n_kv_blocks);
  }
  __device__ __forceinline__ int count() const { return end - first; }
  __device__ __forceinline__ int next(int mb) const { return mb + 1 == end ? first : mb + 1; }
};

// Issue the cp.async copies of query block `mb` of BLOCK_M rows (Q, dO rows; lse, delta entries) into one
// buffer (any struct with q, dout tiles and lse, delta vectors; used by both dK / dV kernels).
// (Head-local gls / pointers: the per-head offsets are computed once per CTA, not kept per thread.)
// The lse / delta entries of the block (warps 0-1 and 2-3).
template <int BLOCK_M, typename T, typename Buf>
__device__ __forceinline__ void fetch_query_stats(Buf &buf, const head_inputs<T> &in, int mb) {
  const int m0 = mb * BLOCK_M;
  const int w = warpid(), seq = in.q.rows();
  if (w < 2) load_async<2 * WARP_THREADS>(buf.lse, in.lse + m0, seq - m0);
  else if (w < 4) load_async<2 * WARP_THREADS>(buf.delta, in.delta + m0, seq - m0);
}
template <int BLOCK_M, typename T, typename Buf>
__device__ __forceinline__ void fetch_query_block(Buf &buf, const head_inputs<T> &in, int mb) {
  const int m0 = mb * BLOCK_M;
  load_async<KV_THREADS>(buf.q, in.q, {0, 0, m0, 0});
  load_async<KV_THREADS>(buf.dout, in.dout, {0, 0, m0, 0});
  fetch_query_stats<BLOCK_M>(buf, in, mb);
}

// S^T = X_g Y_h^T: rows [R g, R g + R) of a 128 x D key-side tile X (K or V; this warp's R = 16 or 32
// keys) against rows [QS h, QS h + QS) of a query-side tile Y (Q or dO), one 16-wide slice of D at a
// time. X_g comes from registers (x_reg) or from shared memory. Used by both dK / dV kernels.
template <bool X_IN_REGS, typename T, int R, int QS, int D, typename XS, typename YS>
__device__ __forceinline__ void scores_t(rt<float, R, QS> &s, const rt<T, R, D> &x_reg, XS &xs, YS &ys, int g, int h) {
  zero(s);
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {
    rt<T, QS, 16> y_frag;
    load_B<BWD_ADDR>(y_frag, subtile<QS, 16>(ys, h, kk));
    if constexpr (X_IN_REGS) {
      mma_ABt(s, col_slice<16>(x_reg, kk), y_frag, s);
    } else {
      rt<T, R, 16> x_frag;
      load<BWD_ADDR>(x_frag, subtile<R, 16>(xs, g, kk));
      mma_ABt(s, x_frag, y_frag, s);
    }
  }
}

// Columns [offset, offset + QS) of a block's lse / delta vector (one value per query) into registers,
// with 8-byte shared loads of the column pairs (half the LDS instructions of 4-byte loads).
template <int QS, int BM>
__device__ __forceinline__ void load_query_vec(row_vec<QS> &v, const sv<float, BM> &src, int offset) {
  load(v, src, offset);
}

// P^T = 2^(S^T c - lse2) in place, with lse2 = lse * log2(e) per query (column). `masked` selects
// the element mask: causal (key > query -> 0) and keys past the sequence end (-> 0).
// The exponent is an explicit fmaf so every kernel variant rounds it identically (the dK / dV of
// the default and the deterministic paths are then bitwise equal).
template <int QS>
__device__ __forceinline__ void probs_t(rt<float, 16, QS> &s, const row_vec<QS> &lse2, float scale_log2,
                                        bool masked, bool causal, int key0, int query0, int seq) {
  col_map(s, s, lse2, [scale_log2](float x, float l) { return fmaf(x, scale_log2, -l); });
  if (masked) {
    if (causal) make_causal_t(s, key0, query0);
    mask_rows(s, key0, seq);
  }
  exp2(s, s);
}

// acc += A @ Y_h, A (16 x QS, row layout, in registers), Y_h rows [QS h, QS h + QS) of a
// block_m x D shared tile, read 16 rows at a time with ldmatrix.trans (col layout = B operand).
template <typename T, int QS, int D, typename YS>
__device__ __forceinline__ void mma_AB_streamed(rt<float, 16, D> &acc, const rt<T, 16, QS> &a, YS &ys, int h) {
#pragma unroll
  for (int kk = 0; kk < QS / 16; kk++) {
    rt<T, 16, D, col_l> y_frag;
    load_B<BWD_ADDR>(y_frag, subtile<16, D>(ys, h * (QS / 16) + kk, 0));
    mma_AB(acc, col_slice<16>(a, kk), y_frag, acc);
  }
}

// Unroll of the 8-step key loop of the dQ partial: 8 (fully unrolled: immediate ldmatrix offsets), but 4
// in the two-barrier split kernel (the A100 path), which spills with 8.
template <bool TWO_BARRIER_SPLIT> constexpr int dq_unroll = TWO_BARRIER_SPLIT ? 4 : 8;
// dQ partial of one query block: (dS K) for this warp's tile of the BM x D output, contracted over
// the CTA's 128 keys, added into this head's slice of dq_accum, either with fp32 red.add instructions
// into the row-major layout (BULK = false; rows >= T skipped) or, on sm_90 (BULK = true), as one 4 KB
// TMA bulk reduction of the warp's 32 x 32 tile, staged in shared memory (`stage`: this warp's 4 KB) in the
// xor32 block layout that dq_accum then has too (rows >= T are zero: their dS is). The bulk path takes
// the atomics out of the warp's instruction stream: red.add bursts fill the load/store queue and keep
// their source registers busy until it drains (ncu: ~15% of the D = 64 kernel's stall samples).
template <typename T, int D, int BM, int WM, bool BULK = false, int UNROLL = dq_unroll<false>, typename DSS,
          typename KS>
__device__ __forceinline__ void dq_partial_atomic(DSS &sdsT, KS &sK, float *dq_head, int seq, int m0,
                                                  float *stage = nullptr) {
  using tiling = dq_tiling<BM, D, WM>;
  constexpr int TM = tiling::TM, TN = tiling::TN;
  const int wm = warpid() % WM, wn = warpid() / WM;
  rt<float, TM, TN> acc;
  zero(acc);
#pragma unroll UNROLL
  for (int kk = 0; kk < KV_BLOCK_N / 16; kk++) {
    rt<T, 16, TM, col_l> ds_frag;   // dS^T rows = keys 16kk.., cols = this warp's queries
    rt<T, 16, TN, col_l> k_frag;    // K rows = keys 16kk.., cols = this warp's d slice
    load<BWD_ADDR>(ds_frag, subtile<16, TM>(sdsT, kk, wm));
    load_B<BWD_ADDR>(k_frag, subtile<16, TN>(sK, kk, wn));
    mma_AtB(acc, ds_frag, k_frag, acc);
  }
  const int row0 = m0 + wm * TM;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (BULK) {
    static_assert(TM == 32 && TN == 32, "the bulk dQ path stages 32 x 32 warp tiles");
    float *warp_stage = stage;
    bulk_wait_group_read<0>();                    // the previous block's reduction has read the staging block
    __syncwarp();
    store_xor32(warp_stage, acc);
    fence_proxy_async_shared();
    __syncwarp();
    if (laneid() == 0) bulk_reduce_add(dq_head + int64_t((row0 / 32) * (D / 32) + wn) * 1024, warp_stage, 4096);
    bulk_commit_group();
    return;
  }
#endif
  if (row0 < seq) atomic_add<D>(dq_head + int64_t(row0) * D + wn * TN, acc, seq - row0);
}

// Before a CTA that used the BULK dQ path exits: its bulk reductions must have finished reading shared memory.
template <bool BULK>
__device__ __forceinline__ void dq_bulk_drain() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (BULK) bulk_wait_group<0>();
#endif
}

// Split dK / dV kernel (backward_dkdv_split.cu).
// Queries per block: 64 (a larger block would not fit the shared memory at D = 128). The split kernel
// runs only at D = 128 (at D = 64 it measured 3-4% slower than the transposed kernel on the H200).
constexpr int SPLIT_BLOCK_M = 64;
constexpr int SPLIT_DQ_WARPS_M = 2;  // dQ partial (64 x 128): 2 x 4 warps of 32 x 32
// One-barrier pipeline (ONE_BAR; 3 query buffers + 2 P^T/dS^T buffers, ~225 KB at D = 128, so H100 /
// H200 only; measured +3-4% at D = 128 on H200; the launcher falls back to the two-barrier version
// when the device's opt-in shared memory is smaller, and always uses it for the deterministic path):
//   step mb: phase 1 (buffer mb%3 -> P/dS mb%2); wait for block mb+1; barrier; prefetch block mb+2 into
//   buffer (mb+2)%3 = (mb-1)%3 (phase 2 of mb-1 is done by everyone: it precedes this barrier);
//   phase 2 (buffer mb%3, P/dS mb%2). P/dS mb%2 is rewritten in phase 1 of mb+2, after barrier mb+1.
// Both pipelines run the same arithmetic in the same order, so dK / dV stay bitwise equal.
template <typename T, int D> using split_kv_tile = st<T, KV_BLOCK_N, D>;

#pragma nv_diag_suppress 177  // (members used by only some of the pipelines)
template <typename T, int D, bool ONE_BAR>
struct split_smem {
  static_assert(!ONE_BAR || SPLIT_BLOCK_M == 64, "the one-barrier pipeline needs 64-query blocks");
  static constexpr int BM = SPLIT_BLOCK_M;
  using kv_tile = st<T, KV_BLOCK_N, D>;
  using q_tile = st<T, BM, D>;
  using pt_tile = st<T, KV_BLOCK_N, BM>;  // P^T or dS^T: [key][query]
  using vec = sv<float, BM>;
  struct stage_tiles {
    q_tile q, dout;
    vec lse, delta;
    static constexpr int q_cols = D;
  };
  struct ps_tiles {
    pt_tile p, ds;  // P^T, dS^T
  };
  static constexpr int n_buf = ONE_BAR ? 3 : 2;  // query-side buffers
  static constexpr int n_ps = ONE_BAR ? 2 : 1;   // P^T / dS^T buffers
  static constexpr int bytes = shared_bytes<kv_tile, kv_tile, stage_tiles[n_buf], ps_tiles[n_ps]>();
  // bulk dQ path: the two-barrier pipeline adds a 4 KB staging block per warp; the one-barrier pipeline
  // stages in the query buffer it is about to refill (see bwd_dkdv_split_kernel), so it needs nothing more
  using dq_stage = float[dq_tiling<BM, D, SPLIT_DQ_WARPS_M>::stage_floats];
  static constexpr int bytes_bulk =
      ONE_BAR ? bytes : shared_bytes<kv_tile, kv_tile, stage_tiles[n_buf], ps_tiles[n_ps], dq_stage>();
};
#pragma nv_diag_default 177

// Deterministic dQ kernel (backward_dq.cu).
constexpr int DQ_WARPS = 4;
constexpr int DQ_THREADS = DQ_WARPS * WARP_THREADS;
constexpr int DQ_BLOCK_M = 64;  // queries per CTA (16 per warp)
constexpr int DQ_BLOCK_N = 64;  // keys per step

template <typename T, int D>
struct dq_smem {
  using q_tile = st<T, DQ_BLOCK_M, D>;
  using kv_tile = st<T, DQ_BLOCK_N, D>;
  using vec = sv<float, DQ_BLOCK_M>;
  static constexpr int bytes = shared_bytes<q_tile, q_tile, kv_tile[2], kv_tile[2], vec, vec>();
};

// Raise the kernel's dynamic shared-memory limit to smem bytes, launch it, and return any error.
template <typename K, typename Args>
cudaError_t launch_with_smem(K kernel, unsigned grid, int threads, int smem, cudaStream_t stream, const Args &a) {
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  kernel<<<grid, threads, smem, stream>>>(a);
  return cudaGetLastError();
}

// Launchers of the kernel files, for T in {bf16, half}; each returns the first CUDA error.
struct dkdv_launch;  // configs.cuh
template <typename T> cudaError_t launch_delta(const bwd_args<T> &a, const gl<T> &o, int D, cudaStream_t stream);
// DROPOUT = true: the kernels with dropout (their args a bwd_dropout_args<T>).
template <typename T, bool DROPOUT>
cudaError_t launch_dkdv_transposed(const dkdv_launch &c, const bwd_args_t<T, DROPOUT> &a, unsigned grid,
                                   cudaStream_t stream);
template <typename T, bool DROPOUT>
cudaError_t launch_dkdv_split(const dkdv_launch &c, const bwd_args_t<T, DROPOUT> &a, unsigned grid, cudaStream_t stream);
template <typename T> cudaError_t launch_dq_convert(const bwd_args<T> &a, int D, cudaStream_t stream);
template <typename T, bool DROPOUT>
cudaError_t launch_dq_deterministic(const bwd_args_t<T, DROPOUT> &a, int D, cudaStream_t stream);

}  // namespace tk_attn
