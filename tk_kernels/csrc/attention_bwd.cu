// Flash attention backward (sm_80+, mma.sync tensor cores), written with the tk tile DSL.
//
// Given Q, K, V, O, dO (B, H, T, D) and lse (B, H, T) from the forward,
//     P    = exp(scale * Q K^T [+ causal mask] - lse)     (recomputed, never stored)
//     dV   = P^T dO                 dP = dO V^T
//     dS   = P * (dP - delta)       delta_i = rowsum(dO_i * O_i)
//     dQ   = scale * dS K           dK = scale * dS^T Q
// Causal is top-left aligned (key j is visible to query i iff j <= i). Exponentials are exp2 with
// log2(e) folded into the scale: P = 2^(S * scale*log2e - lse*log2e).
//
// Kernels (one launch each, every launch checked):
//   bwd_delta_kernel       delta = rowsum(dO * O), fp32, into p.delta.
//   bwd_dkdv_kernel        FlashAttention-2 style, parallel over key blocks: dK, dV (and, on the default
//                          path, dQ partial sums added into p.dq_accum). Used for D = 64, and with small
//                          query blocks on 99 KB GPUs for both head dims.
//   dQ partial sums: on sm_90 each warp stages its 32 x 32 fp32 block in shared memory and hands it to
//                          the TMA unit as one 4 KB bulk reduction (cp.reduce.async.bulk .add.f32; see
//                          dq_partial_atomic; TK_BWD_DQ_BULK); elsewhere (and in configurations without
//                          room for the staging) fp32 red.add instructions. Measured on H200: +5-10% for
//                          the whole backward (the red.add bursts stalled the warps).
//   bwd_dkdv_split_kernel  the same job with a different warp tiling (P^T / dS^T staged in shared
//                          memory); used for D = 128 (faster there on H200; -D knobs below).
//   bwd_dq_convert_kernel  dq = scale * dq_accum, cast and stored with dq's strides (default path).
//   bwd_dq_kernel          deterministic path only: parallel over query blocks, recomputes P and dS and
//                          accumulates dQ in registers, so dQ is bitwise reproducible (no atomics).
// Convention: dq_accum holds the UNSCALED sum of dS K; the scale is applied by the convert kernel.
// Shared memory: the dK / dV kernels have several configurations; each launch runs the largest that
// the device's opt-in shared memory per block fits (dkdv_choice, near the launchers), so the backward
// runs on 99 KB GPUs (RTX 30xx / 40xx) too; TK_SMEM_LIMIT=<bytes> lowers that budget (testing).
// bwd_dq_kernel needs 49,792 B (D = 64) / 98,944 B (D = 128), which fits everywhere.
#include <cmath>
#include <cstdlib>

#include "attention.h"
// The DSL's address-generation knob (common/util.cuh) for this file only: 2 = lane-only swizzle XORs on
// sm_90+ (see the knob list below); the forward keeps its own setting (with 2 its causal D = 64 kernel
// spills 8 bytes on sm_90a).
#ifndef TK_SWIZZLE_LANE_XOR
#define TK_SWIZZLE_LANE_XOR 2
#endif
#include "tk.cuh"

namespace tk_attn {
namespace {

using namespace tk;

__host__ __device__ constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }
constexpr int64_t cdiv64(int64_t a, int64_t b) { return (a + b - 1) / b; }

template <typename T>
gl<T> make_gl(const BwdParams &p, const void *ptr, const Strides &s) {
  return gl<T>{static_cast<T *>(const_cast<void *>(ptr)), p.B, p.H, p.T, p.D, s.b, s.h, s.t};
}

// ============================================================================================
// delta = rowsum(dO * O)
// ============================================================================================
// One row of D elements is handled by D/8 consecutive lanes, each reading 16 bytes of dO and of O;
// the partial dot products are summed with xor-shuffles inside the lane group. A row group never
// straddles a warp (D/8 divides 32), and every lane takes part in the shuffles (rows past the end
// contribute 0 and are not stored).
constexpr int DELTA_THREADS = 256;

template <typename T, int D>
__global__ void __launch_bounds__(DELTA_THREADS) bwd_delta_kernel(const gl<T> o, const gl<T> dout, float *delta) {
  constexpr int LANES_PER_ROW = D / 8;
  constexpr int ROWS_PER_CTA = DELTA_THREADS / LANES_PER_ROW;
  const int64_t rows = int64_t(o.batch) * o.heads * o.seq;
  const int64_t row = int64_t(blockIdx.x) * ROWS_PER_CTA + threadIdx.x / LANES_PER_ROW;
  const int col = (threadIdx.x % LANES_PER_ROW) * 8;

  float acc = 0.f;
  if (row < rows) {
    const int t = int(row % o.seq);
    const int bh = int(row / o.seq);
    const int b = bh / o.heads, h = bh % o.heads;
    const int4 ov = *reinterpret_cast<const int4 *>(o.at(b, h, t, col));
    const int4 dv = *reinterpret_cast<const int4 *>(dout.at(b, h, t, col));
    const packed_t<T> *o2 = reinterpret_cast<const packed_t<T> *>(&ov);
    const packed_t<T> *d2 = reinterpret_cast<const packed_t<T> *>(&dv);
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float2 a = convert_pair<float2>(o2[i]), c = convert_pair<float2>(d2[i]);
      acc += a.x * c.x + a.y * c.y;
    }
  }
#pragma unroll
  for (int off = LANES_PER_ROW / 2; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (row < rows && col == 0) delta[row] = acc;
}

// ============================================================================================
// dK, dV (and atomic dQ partials): one CTA per (block of 128 keys, b, h)
// ============================================================================================
// Tiling: 8 warps; warp w owns keys [n0 + 16w, n0 + 16w + 16) of the CTA's BLOCK_N = 128 keys and
// keeps their dK, dV rows (16 x D fp32 each) in registers for the whole kernel. The CTA walks the
// query blocks of block_m rows (D = 64: 128, D = 128: 64; causal: only blocks at/after the key
// block's diagonal), each in steps of q_step queries (D = 64: 64, D = 128: 32):
//
//     S^T  = K_w Q^T           (16 keys x q_step queries, fp32)  A: K_w  B: Q  (ldmatrix, row layout)
//     P^T  = 2^(S^T c - lse2)  column broadcast of lse (queries run along columns); masked on the
//                              diagonal blocks (key > query) and for keys >= T
//     dP^T = V_w dO^T                                          A: V_w     B: dO (ldmatrix, row layout)
//     dS^T = P^T * (dP^T - delta)                              (column broadcast of delta)
//     dV  += P^T dO            A: P^T straight from registers  B: dO (ldmatrix.trans, col layout)
//     dK  += dS^T Q            A: dS^T from registers           B: Q  (ldmatrix.trans)
//     dS^T -> shared (16-bit) ; __syncthreads (the only barrier per query block)
//     dQ_part = dS K           (block_m x D), warps tile it 4x2 (D=64) or 2x4 (D=128);
//                              A: dS^T tile read with ldmatrix.trans, B: K with ldmatrix.trans;
//                              added into dq_accum with fp32 red.add, or on sm_90 as one TMA bulk
//                              reduction per warp (dq_partial_atomic).
// Causal: a warp whose 16 keys all come after every query of a step has P = 0 there; it skips the
// step and writes zeros to its dS^T rows.
// Computing the TRANSPOSED scores is what lets P^T and dS^T feed the dV / dK products directly as
// A operands (an fp32 accumulator packed pairwise to 16 bits is the A fragment), so only dS goes
// through shared memory, and only once (for dQ, whose contraction runs over all 8 warps' keys).
//
// Shared memory: K, V (128 x D), and double-buffered Q, dO (block_m x D), dS^T (128 x block_m), lse,
// delta, all swizzled (conflict-free cp.async / ldmatrix / fragment stores).
// K_w and V_w are also kept in registers at D = 64; at D = 128 they are re-read from shared memory
// per 16-column slice (registers go to the 2 x 64 fp32 dK / dV accumulators). S^T / dP^T are
// computed q_step queries at a time (a rolled loop over the block).
// block_m is a template parameter; the launcher runs the largest configuration that the device's
// opt-in shared memory per block fits (see dkdv_choice):
//   D = 64,  block_m 128, q_step 64: 198,784 B  H100 / H200 (sm_90: + 32 KB staging for the bulk dQ path)
//   D = 64,  block_m 128, q_step 64: 166,016 B  A100 (red.add dQ)
//   D = 64,  block_m  64, q_step 64:  99,456 B  99 KB GPUs (RTX 30xx / 40xx: sm_86 / sm_89)
//   D = 128, block_m  16, q_step 16:  90,496 B  99 KB GPUs (the larger GPUs run the split kernel below)
// The D = 128 small configuration keeps the 128-key block (K and V alone take 64 KB), so 16 queries
// per block is what fits double-buffered; its dQ partial is a 16 x 128 tile, one 16 x 16 tile per warp.
// Per warp and block it issues 80 mma for 64 ldmatrix.x4; GeForce parts run fp32-accumulate mma at half
// rate, so by that count the tensor cores, not shared memory, should bound it (estimate; not timed).
// All run at <= 255 registers with no spills on sm_80 / sm_86 / sm_89 / sm_90a.
// Pipeline: the next Q / dO / lse / delta tile is fetched with cp.async at the top of an iteration
// and waited for just before the iteration's single __syncthreads (see dkdv_step).
//
// Ragged T, no masking needed for query rows >= T: Q, dO, lse and delta rows are zero-filled, so
// such a column has S = 0, P = 2^0 = 1, but dO = 0 (dV gets exactly 0) and dP = delta = 0 (dS = 0,
// dK gets exactly 0); its dQ row is never stored. Keys >= T (only in the last key block) are masked
// to P = 0 explicitly (with K = 0, P would be 2^(-lse2), which can overflow for very negative lse).
constexpr int KV_WARPS = 8;
constexpr int KV_THREADS = KV_WARPS * WARP_THREADS;
constexpr int KV_BLOCK_N = 128;  // keys per CTA (16 per warp)

// Tuning knobs for GPU A/B runs (TK_EXTRA_NVCC_FLAGS="-D..."). All D = 64 combinations are
// spill-free; TK_BWD_D128_Q_STEP=64 is spill-free only in the atomic-dQ (default) variant.
#ifndef TK_BWD_D64_BLOCK_M
#define TK_BWD_D64_BLOCK_M 128
#endif
#ifndef TK_BWD_D64_Q_STEP
#define TK_BWD_D64_Q_STEP 64
#endif
#ifndef TK_BWD_D128_Q_STEP
#define TK_BWD_D128_Q_STEP 32
#endif
#ifndef TK_BWD_D64_MIN_BLOCKS
#define TK_BWD_D64_MIN_BLOCKS 1   // 2: two CTAs (16 warps) per SM, <= 128 registers (needs BLOCK_M=64)
#endif
#ifndef TK_BWD_D64_KV_REGS
#define TK_BWD_D64_KV_REGS 1      // keep the warp's K / V rows in registers
#endif
// Instruction-overhead knobs (results bitwise unchanged except for the usual atomic-order nondeterminism
// of dQ). On by default since 2026-11-29 (measured together with TK_BWD_DQ_BULK, bench/RESULTS.md):
// TK_SWIZZLE_LANE_XOR=2, TK_BWD_DQ_UNROLL=8, TK_BWD_LDS64=1, TK_BWD_HQ_UNROLL=2.
// SASS per query block, see the commit log:
//   TK_SWIZZLE_LANE_XOR=1|2 (DSL, util.cuh)  ldmatrix / fragment-store addresses: swizzle XOR on the lane
//                           offset only, tile offsets added after (2: sm_90+ only; on sm_80 it costs an
//                           8-byte spill in the two-barrier split kernel).
//   TK_BWD_DQ_UNROLL=8      fully unrolled key loop in the dQ partial (immediate ldmatrix offsets).
//   TK_BWD_LDS64=1          lse / delta column pairs read with 8-byte shared loads.
//   TK_BWD_HQ_UNROLL=2      both query steps of a D = 64 block unrolled in bwd_dkdv_kernel (offsets become
//                           immediates; the lane offsets are not rebuilt for the second step).
// (Each build uses one kernel per head dim, so some knobs of the other kernel stay unreferenced.)
#pragma nv_diag_suppress 177
// block_m (queries per block; one barrier + dQ partial each) is a template parameter: the default
// (dkdv_block_m) runs where the device's opt-in shared memory fits it, the small one
// (dkdv_small_block_m) on 99 KB parts (RTX 30xx / 40xx: sm_86 / sm_89); the launcher picks.
template <int D> constexpr int dkdv_block_m = D == 64 ? TK_BWD_D64_BLOCK_M : 64;
template <int D> constexpr int dkdv_small_block_m = D == 64 ? 64 : 16;
template <int D, int BM = dkdv_block_m<D>> struct dkdv_config;
template <int BM> struct dkdv_config<64, BM> {
  static constexpr int block_m = BM;                  // queries per block (one barrier + dQ partial each)
  static constexpr int min_blocks = TK_BWD_D64_MIN_BLOCKS;
  static constexpr bool kv_in_registers = TK_BWD_D64_KV_REGS;
  static constexpr int q_step = TK_BWD_D64_Q_STEP;    // queries per S^T / dP^T register tile
  static constexpr int dq_warps_m = 4;                // dQ partial (block_m x 64): warp tile block_m/4 x 32
  static_assert((block_m == 64 || block_m == 128) && (q_step == 32 || q_step == 64) && block_m % q_step == 0,
                "TK_BWD_D64_BLOCK_M must be 64 or 128 and TK_BWD_D64_Q_STEP 32 or 64 (dividing it)");
};
template <int BM> struct dkdv_config<128, BM> {
  static constexpr int block_m = BM;    // default 64 (128 would need > 227 KB of shared memory); small: 16
  static constexpr int min_blocks = 1;
  static constexpr bool kv_in_registers = false;
  static constexpr int q_step = TK_BWD_D128_Q_STEP < BM ? TK_BWD_D128_Q_STEP : BM;  // S^T / dP^T tile width
  static_assert(TK_BWD_D128_Q_STEP == 32 || TK_BWD_D128_Q_STEP == 64, "TK_BWD_D128_Q_STEP must be 32 or 64");
  static_assert(BM == 16 || BM == 32 || BM == 64, "D = 128: block_m must be 16, 32 or 64");
  static constexpr int dq_warps_m = BM >= 32 ? 2 : 1;  // dQ partial (BM x 128): warp tile BM/2 x 32, or 16 x 16
};
#pragma nv_diag_default 177

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
  const float *lse;       // (B, H, T) contiguous
  const float *delta;     // (B, H, T) contiguous
  int seq, heads;
  float scale;            // softmax scale
  float scale_log2;       // scale * log2(e)
  bool causal;
};

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
  c.bh_count = a.q.batch * a.heads;
  kv_block_coords(c.n_kv_blocks, c.bh_count, a.causal, c.kb, c.bh);
  c.b = c.bh / a.heads;
  c.h = c.bh % a.heads;
  c.n0 = c.kb * KV_BLOCK_N;
  return c;
}

// The order in which a CTA visits its query blocks. Without a causal mask every key block of a head
// walks the same blocks; in lock-step they would all add their dQ partials into the same dq_accum rows
// (and read the same Q / dO lines) at the same moment. So non-causal CTAs start at a block proportional
// to their key block and wrap around (TK_BWD_ROTATE=0: everyone starts at block 0; 2: rotate causal
// CTAs too). The visiting order is the same in the atomic and deterministic kernels, so dK / dV keep
// the same summation order on both paths.
// TK_BWD_DQ_BULK=1: on sm_90, dQ partials go through shared memory and TMA bulk reductions instead of
// red.add instructions (dq_partial_atomic below), where the kernel's shared memory has room for the staging.
#ifndef TK_BWD_DQ_BULK
#define TK_BWD_DQ_BULK 1
#endif
#ifndef TK_BWD_D128_BULK_PIPE
#define TK_BWD_D128_BULK_PIPE 1  // D = 128 bulk dQ: 1 = one-barrier pipeline (staging in a free query buffer), 2 = two-barrier
#endif
#ifndef TK_BWD_ROTATE
#define TK_BWD_ROTATE 1
#endif
struct query_block_order {
  int first, end, start;  // blocks [first, end), visited from `start`, wrapping around to `first`
  __device__ __forceinline__ query_block_order(int mb_first, int mb_end, int kb, int n_kv_blocks, bool causal)
      : first(mb_first), end(mb_end), start(mb_first) {
    if (TK_BWD_ROTATE == 2 || (TK_BWD_ROTATE == 1 && !causal))
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
  const int w = warpid(), seq = in.q.seq;
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
    load_B(y_frag, subtile<QS, 16>(ys, h, kk));
    if constexpr (X_IN_REGS) {
      mma_ABt(s, col_slice<16>(x_reg, kk), y_frag, s);
    } else {
      rt<T, R, 16> x_frag;
      load(x_frag, subtile<R, 16>(xs, g, kk));
      mma_ABt(s, x_frag, y_frag, s);
    }
  }
}

// Columns [offset, offset + QS) of a block's lse / delta vector (one value per query) into registers.
// TK_BWD_LDS64=1: 8-byte shared loads of the column pairs (same values, half the LDS instructions).
#ifndef TK_BWD_LDS64
#define TK_BWD_LDS64 1
#endif
template <int QS, int BM>
__device__ __forceinline__ void load_query_vec(row_vec<QS> &v, const sv<float, BM> &src, int offset) {
  if constexpr (TK_BWD_LDS64) load(v, src, offset);
  else load(v, src.data + offset, QS);
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
    load_B(y_frag, subtile<16, D>(ys, h * (QS / 16) + kk, 0));
    mma_AB(acc, col_slice<16>(a, kk), y_frag, acc);
  }
}

#ifndef TK_BWD_DQ_UNROLL
#define TK_BWD_DQ_UNROLL 8  // unroll of the 8-step key loop of the dQ partial (8: fully unrolled)
#endif
// (The two-barrier split kernel, the A100 path, keeps 4: with 8 it spills in some knob combinations.)
template <bool TWO_BARRIER_SPLIT> constexpr int dq_unroll = TWO_BARRIER_SPLIT ? 4 : TK_BWD_DQ_UNROLL;
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
    load(ds_frag, subtile<16, TM>(sdsT, kk, wm));
    load_B(k_frag, subtile<16, TN>(sK, kk, wn));
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

// The CTA's shared tiles.
template <typename T, int D, int BLOCK_M = dkdv_block_m<D>>
struct dkdv_tiles {
  using S = dkdv_smem<T, D, BLOCK_M>;
  typename S::kv_tile &k, &v;
  typename S::stage_tiles (&buf)[2];
  float *dq_stage;  // fp32 staging of the bulk dQ path (nullptr otherwise)
};

// Where this CTA sits: its head's inputs and dq_accum slice, first key n0, this warp's first key.
template <typename T>
struct kv_block_pos {
  head_inputs<T> in;
  float *dq_head;
  int n0, key0;
  bool kv_tail;  // the key block runs past T
};

// One query block mb (rows [block_m mb, block_m (mb + 1))) against the CTA's keys, using buffer `stage`:
// prefetch the next block of the CTA's order (mb_next, -1 if none) into the other buffer, accumulate dV
// and dK, write dS^T, then ONE barrier (this block's dS^T is complete and the next block has landed, for
// every warp), then this block's dQ partial (ATOMIC_DQ). Why one barrier suffices: Q / dO / lse / delta
// of buffer `stage` are only read before it, so the next step may refill that buffer right away; dS^T
// is double-buffered, so its next overwrite (two steps on) comes after the next step's barrier, which
// every warp reaches only once its dQ reads of this step are done.
#ifndef TK_BWD_HQ_UNROLL
#define TK_BWD_HQ_UNROLL 2  // unroll of the query-step loop in dkdv_step (1: rolled; 2: both steps of a D = 64 block)
#endif
constexpr int hq_unroll = TK_BWD_HQ_UNROLL;
template <typename T, int D, bool ATOMIC_DQ, int BLOCK_M, bool BULK>
__device__ __forceinline__ void dkdv_step(const dkdv_tiles<T, D, BLOCK_M> &sm, const bwd_args<T> &a,
                                          const kv_block_pos<T> &c, int mb, int mb_next, int stage,
                                          const rt<T, 16, D> &k_reg, const rt<T, 16, D> &v_reg, rt<float, 16, D> &dk,
                                          rt<float, 16, D> &dv) {
  using cfg = dkdv_config<D, BLOCK_M>;
  constexpr int QS = cfg::q_step, BM = cfg::block_m;
  const int m0 = mb * BM;
  const int w = warpid();
  if (mb_next >= 0) fetch_query_block<BLOCK_M>(sm.buf[stage ^ 1], c.in, mb_next);
  auto &cur = sm.buf[stage];
  commit_group();                                 // (possibly empty) group for the next block

#pragma unroll hq_unroll
  for (int hq = 0; hq < BM / QS; hq++) {          // query steps of QS within the block
    const int q0 = m0 + hq * QS;
    if (a.causal && c.key0 > q0 + QS - 1) {         // all of this warp's keys are after all queries: P = 0
      if constexpr (ATOMIC_DQ) {
        rt<T, 16, QS> zeros;
        zero(zeros);
        store(subtile<16, QS>(cur.dsT, w, hq), zeros);
      }
      continue;
    }
    // P^T
    rt<float, 16, QS> p;
    scores_t<cfg::kv_in_registers, T>(p, k_reg, sm.k, cur.q, w, hq);
    row_vec<QS> lse2;
    load_query_vec(lse2, cur.lse, hq * QS);
    mul(lse2, lse2, LOG2E);
    const bool masked = (a.causal && q0 < c.n0 + KV_BLOCK_N) || c.kv_tail;
    probs_t(p, lse2, a.scale_log2, masked, a.causal, c.key0, q0, a.seq);

    // dS^T = P^T * (dP^T - delta)
    rt<float, 16, QS> ds;
    scores_t<cfg::kv_in_registers, T>(ds, v_reg, sm.v, cur.dout, w, hq);
    row_vec<QS> delta;
    load_query_vec(delta, cur.delta, hq * QS);
    sub_col(ds, ds, delta);
    mul(ds, ds, p);

    rt<T, 16, QS> p16, ds16;
    copy(p16, p);
    copy(ds16, ds);
    if constexpr (ATOMIC_DQ) store(subtile<16, QS>(cur.dsT, w, hq), ds16);

    mma_AB_streamed<T, QS, D>(dv, p16, cur.dout, hq);  // dV += P^T dO
    mma_AB_streamed<T, QS, D>(dk, ds16, cur.q, hq);    // dK += dS^T Q
  }

  wait_group<0>();                                // the next block has landed (this thread's copies)
  __syncthreads();                                // all copies and all warps' dS^T rows are visible
  if constexpr (ATOMIC_DQ)
    dq_partial_atomic<T, D, BM, cfg::dq_warps_m, BULK>(cur.dsT, sm.k, c.dq_head, a.seq, m0, sm.dq_stage + w * 1024);
}

// Epilogue copy of this warp's 16 staged dK / dV rows (in its own rows of sK / sV) to global memory,
// keys >= T skipped. Not inlined on purpose: its address math then starts from scratch instead of
// reusing values the compiler would otherwise keep alive (or spill) across the whole main loop.
template <typename T, int D>
__device__ __noinline__ void store_dkdv_rows(const bwd_args<T> &a, const st<T, KV_BLOCK_N, D> &sK,
                                             const st<T, KV_BLOCK_N, D> &sV, int n_kv_blocks, int bh_count) {
  int kb, bh;
  kv_block_coords(n_kv_blocks, bh_count, a.causal, kb, bh);
  const int b = bh / a.heads, h = bh % a.heads, w = warpid(), key0 = kb * KV_BLOCK_N + 16 * w;
  store<WARP_THREADS>(a.dk, subtile<16, D>(sK, w, 0), {b, h, key0, 0});
  store<WARP_THREADS>(a.dv, subtile<16, D>(sV, w, 0), {b, h, key0, 0});
}

template <typename T, int D, bool ATOMIC_DQ, int BLOCK_M = dkdv_block_m<D>, bool BULK = false>
__global__ void __launch_bounds__(KV_THREADS, dkdv_config<D, BLOCK_M>::min_blocks)
bwd_dkdv_kernel(const __grid_constant__ bwd_args<T> a) {
  using cfg = dkdv_config<D, BLOCK_M>;
  using S = dkdv_smem<T, D, BLOCK_M>;
  extern __shared__ __align__(128) char smem[];
  shared_allocator al(smem);
  typename S::kv_tile &sK = al.allocate<typename S::kv_tile>();
  typename S::kv_tile &sV = al.allocate<typename S::kv_tile>();
  typename S::stage_tiles(&buf)[2] = al.allocate<typename S::stage_tiles[2]>();
  float *dq_stage = nullptr;
  if constexpr (BULK) dq_stage = al.allocate<typename S::dq_stage>();

  const int seq = a.seq;
  const auto [n_kv_blocks, bh_count, kb, bh, b, h, n0] = locate_kv_cta(a);  // n0: first key of the CTA
  const int w = warpid();
  const int key0 = n0 + 16 * w;                   // first key of this warp
  const int mb_first = a.causal ? n0 / cfg::block_m : 0;
  const int mb_end = cdiv(seq, cfg::block_m);
  const bool kv_tail = n0 + KV_BLOCK_N > seq;     // keys >= T inside this block

  // Prologue: K, V and the first query block, one group.
  load_async<KV_THREADS>(sK, a.k, {b, h, n0, 0});
  load_async<KV_THREADS>(sV, a.v, {b, h, n0, 0});
  const head_inputs<T> in{a.q.head(b, h), a.dout.head(b, h), a.lse + int64_t(bh) * seq, a.delta + int64_t(bh) * seq};
  const query_block_order order(mb_first, mb_end, kb, n_kv_blocks, a.causal);
  fetch_query_block<BLOCK_M>(buf[0], in, order.start);
  commit_group();
  wait_group<0>();
  __syncthreads();

  rt<T, 16, D> k_reg, v_reg;                      // used when cfg::kv_in_registers
  if constexpr (cfg::kv_in_registers) {
    load(k_reg, subtile<16, D>(sK, w, 0));
    load(v_reg, subtile<16, D>(sV, w, 0));
  }
  rt<float, 16, D> dk, dv;
  zero(dk);
  zero(dv);

  const dkdv_tiles<T, D, BLOCK_M> sm{sK, sV, buf, dq_stage};
  float *dq_head = ATOMIC_DQ ? a.dq_accum.ptr + int64_t(bh) * (BULK ? a.dq_rows : seq) * D : nullptr;
  const kv_block_pos<T> pos{in, dq_head, n0, key0, kv_tail};
  for (int i = 0, mb = order.start; i < order.count(); i++, mb = order.next(mb))
    dkdv_step<T, D, ATOMIC_DQ, BLOCK_M, BULK>(sm, a, pos, mb, i + 1 < order.count() ? order.next(mb) : -1, i & 1,
                                              k_reg, v_reg, dk, dv);

  // Epilogue: dK *= scale; stage both through this warp's own rows of sK / sV (after the barrier no
  // warp reads K any more), then 16-byte stores; keys >= T are skipped.
  __syncthreads();
  mul(dk, dk, a.scale);
  auto dk_stage = subtile<16, D>(sK, w, 0);
  auto dv_stage = subtile<16, D>(sV, w, 0);
  store(dk_stage, dk);
  store(dv_stage, dv);
  __syncwarp();
  store_dkdv_rows<T, D>(a, sK, sV, n_kv_blocks, bh_count);
  dq_bulk_drain<BULK>();
}

// ============================================================================================
// dK, dV (and atomic dQ partials), split-phase variant: P^T and dS^T staged in shared memory
// ============================================================================================
// Same grid, 128-key blocks and ragged-T handling as bwd_dkdv_kernel; BM = 64-query blocks
// (TK_BWD_D64_SPLIT_BLOCK_M=128 for D = 64: warp tiles 32 keys x 64 queries in phase 1).
// The difference is how the 8 warps share the work: two 16-bit tile stores per block buy fewer
// ldmatrix reads (in the kernel above every B fragment feeds a single m16 tile, 16 keys per warp).
//
//   phase 1, warp grid 4 (key groups of 32) x 2 (query halves), warp tile 32 keys x BM/2 queries:
//       S^T = K_g Q_h^T, P^T = 2^(S^T c - lse2) (masked), dP^T = V_g dO_h^T, dS^T = P^T (dP^T - delta)
//       -> P^T and dS^T stored (16-bit) into the CTA's [key][query] tiles.          __syncthreads
//   phase 2, warp grid 4 (key groups of 32) x 2 (halves of D), warp tile 32 keys x D/2:
//       dV += P^T dO   (A: P^T tile, ldmatrix; B: dO, ldmatrix.trans)
//       dK += dS^T Q   (A: dS^T tile; B: Q)
//       dQ partial = dS K, atomically added (as in the kernel above).              __syncthreads
// ldmatrix.x4 per block and warp (D = 128): 64 + 24 + 24 + 32 = 144 for 320 mma (vs 192 above).
// Warp w handles key group w / 2 in both phases (query half / D half w % 2). D = 64 with BM = 64
// keeps the warp's 32 x 64 K and V slices in registers (the phase-1 A operands).
// Two-barrier pipeline: because phase 2 still reads Q / dO, the next block is prefetched only after
// the previous block's second barrier (into the buffer that block used); P^T / dS^T need a single
// buffer. The one-barrier pipeline below trades shared memory for the second barrier.
// Shared memory: D = 64 ~97 KB (BM 128: ~162 KB), D = 128 ~161 KB (+ 32 KB dQ staging with bulk dQ).
#ifndef TK_BWD_D64_SPLIT
#define TK_BWD_D64_SPLIT 0    // measured on H200: -3-4% vs the transposed kernel at D = 64
#endif
#ifndef TK_BWD_D128_SPLIT
#define TK_BWD_D128_SPLIT 1   // measured on H200: +7-10% over the transposed kernel at D = 128
#endif
#ifndef TK_BWD_D64_SPLIT_BLOCK_M
#define TK_BWD_D64_SPLIT_BLOCK_M 64  // 128: phase-1 warp tiles 32 keys x 64 queries
#endif
template <int D> constexpr bool split_enabled = D == 64 ? TK_BWD_D64_SPLIT : TK_BWD_D128_SPLIT;
// Queries per block (D = 128: 64; a larger block would not fit the shared memory).
template <int D> constexpr int split_block_m = D == 64 ? TK_BWD_D64_SPLIT_BLOCK_M : 64;
static_assert(TK_BWD_D64_SPLIT_BLOCK_M == 64 || TK_BWD_D64_SPLIT_BLOCK_M == 128,
              "TK_BWD_D64_SPLIT_BLOCK_M must be 64 or 128");
// D = 64 with 64-query blocks keeps the warp's 32 x 64 K / V slices (phase-1 A operands) in registers.
template <int D> constexpr bool split_kv_in_registers = D == 64 && split_block_m<D> == 64;
#ifndef TK_BWD_SPLIT_ONE_BARRIER
#define TK_BWD_SPLIT_ONE_BARRIER 1  // 1: one-barrier pipeline on the atomic path where the smem fits
#endif
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
  static_assert(!ONE_BAR || split_block_m<D> == 64, "the one-barrier pipeline needs 64-query blocks");
  static constexpr int BM = split_block_m<D>;
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
  using dq_stage = float[dq_tiling<BM, D, dkdv_config<D>::dq_warps_m>::stage_floats];
  static constexpr int bytes_bulk =
      ONE_BAR ? bytes : shared_bytes<kv_tile, kv_tile, stage_tiles[n_buf], ps_tiles[n_ps], dq_stage>();
};
#pragma nv_diag_default 177

// acc (32 keys x D/2) += A_g Y[:, half] with A_g rows [32 g, 32 g + 32) of a [key][query] shared
// tile (P^T or dS^T; ldmatrix, row layout = A operand) and Y the BM x D query-side tile (dO or Q;
// ldmatrix.trans, col layout = B operand), 16 queries at a time.
template <typename T, int D, int BM, typename PS, typename YS>
__device__ __forceinline__ void mma_AB_shared(rt<float, 32, D / 2> &acc, PS &ps, YS &ys, int g, int half) {
#pragma unroll
  for (int kk = 0; kk < BM / 16; kk++) {
    rt<T, 32, 16> a_frag;
    rt<T, 16, D / 2, col_l> y_frag;
    load(a_frag, subtile<32, 16>(ps, g, kk));
    load_B(y_frag, subtile<16, D / 2>(ys, kk, half));
    mma_AB(acc, a_frag, y_frag, acc);
  }
}

// Phase 1 of one query block for this warp's 32 keys x BM/2 queries: P^T and dS^T into shared memory.
template <typename T, int D, typename Buf, typename PS>
__device__ __forceinline__ void split_phase1(const Buf &cur, PS &sPt, PS &sdSt, const split_kv_tile<T, D> &sK,
                                             const split_kv_tile<T, D> &sV, const rt<T, 32, D> &k_reg,
                                             const rt<T, 32, D> &v_reg, const bwd_args<T> &a, int n0, int m0,
                                             bool kv_tail) {
  constexpr bool REGS = split_kv_in_registers<D>;
  constexpr int QP = split_block_m<D> / 2;       // queries per warp
  const int g = warpid() >> 1, qh = warpid() & 1;
  const int key0 = n0 + 32 * g, q0 = m0 + QP * qh;
  auto pt = subtile<32, QP>(sPt, g, qh);
  auto dst = subtile<32, QP>(sdSt, g, qh);
  if (a.causal && key0 > q0 + QP - 1) {          // every key after every query: P = dS = 0
    rt<T, 32, QP> zeros;
    zero(zeros);
    store(pt, zeros);
    store(dst, zeros);
    return;
  }
  rt<float, 32, QP> p, ds;
  scores_t<REGS, T>(p, k_reg, sK, cur.q, g, qh);
  row_vec<QP> lse2;
  load_query_vec(lse2, cur.lse, QP * qh);
  mul(lse2, lse2, LOG2E);
  const bool masked = (a.causal && q0 < n0 + KV_BLOCK_N) || kv_tail;
  col_map(p, p, lse2, [c = a.scale_log2](float x, float l) { return fmaf(x, c, -l); });
  if (masked) {
    if (a.causal) make_causal_t(p, key0, q0);
    mask_rows(p, key0, a.seq);
  }
  exp2(p, p);

  scores_t<REGS, T>(ds, v_reg, sV, cur.dout, g, qh);
  row_vec<QP> delta;
  load_query_vec(delta, cur.delta, QP * qh);
  sub_col(ds, ds, delta);
  mul(ds, ds, p);
  store(pt, p);                                   // fp32 -> 16-bit on the way
  store(dst, ds);
}

template <typename T, int D>
__device__ __noinline__ void store_dkdv_split(const bwd_args<T> &a, const split_kv_tile<T, D> &sK,
                                              const split_kv_tile<T, D> &sV, int n_kv_blocks,
                                              int bh_count) {
  int kb, bh;
  kv_block_coords(n_kv_blocks, bh_count, a.causal, kb, bh);
  const int b = bh / a.heads, h = bh % a.heads, g = warpid() >> 1, half = warpid() & 1;
  const coord c{b, h, kb * KV_BLOCK_N + 32 * g, (D / 2) * half};
  store<WARP_THREADS>(a.dk, subtile<32, D / 2>(sK, g, half), c);
  store<WARP_THREADS>(a.dv, subtile<32, D / 2>(sV, g, half), c);
}

// The same copies split by warp (D = 128, 64-query blocks): warp w loads rows [16 (w % 4), 16 (w % 4) + 16) of
// Q (w < 4) or dO (w >= 4), a contiguous 4 KB of the buffer, which is also the block the one-barrier bulk
// pipeline uses as that warp's dQ staging (so a warp only waits for its own bulk reduction before refilling).
template <typename T, int D, typename Buf>
__device__ __forceinline__ void fetch_query_block_split_warp(Buf &buf, const head_inputs<T> &in, int mb) {
  static_assert(D == 128 && split_block_m<D> == 64, "per-warp query-block fetch: D = 128, 64-query blocks");
  const int m0 = mb * split_block_m<D>;
  const int w = warpid(), r = 16 * (w & 3);
  if (w < 4) load_async<WARP_THREADS>(subtile<16, D>(buf.q, w & 3, 0), in.q, {0, 0, m0 + r, 0});
  else load_async<WARP_THREADS>(subtile<16, D>(buf.dout, w & 3, 0), in.dout, {0, 0, m0 + r, 0});
  fetch_query_stats<split_block_m<D>>(buf, in, mb);
}
// This warp's 4 KB of a query buffer in that split (its dQ staging block in the one-barrier bulk pipeline).
template <typename Buf>
__device__ __forceinline__ float *warp_share(Buf &buf) {
  const int w = warpid();
  auto *tile = w < 4 ? buf.q.data : buf.dout.data;
  return reinterpret_cast<float *>(tile + 16 * (w & 3) * Buf::q_cols);
}

template <typename T, int D, bool ATOMIC_DQ, bool ONE_BAR, bool BULK = false>
__global__ void __launch_bounds__(KV_THREADS, 1) bwd_dkdv_split_kernel(const __grid_constant__ bwd_args<T> a) {
  using S = split_smem<T, D, ONE_BAR>;
  extern __shared__ __align__(128) char smem[];
  shared_allocator al(smem);
  typename S::kv_tile &sK = al.allocate<typename S::kv_tile>();
  typename S::kv_tile &sV = al.allocate<typename S::kv_tile>();
  typename S::stage_tiles(&buf)[S::n_buf] = al.allocate<typename S::stage_tiles[S::n_buf]>();
  typename S::ps_tiles(&ps)[S::n_ps] = al.allocate<typename S::ps_tiles[S::n_ps]>();
  constexpr bool STAGED = ONE_BAR && BULK;         // one-barrier pipeline, dQ staged in the query buffers
  float *dq_stage = nullptr;                      // this warp's 4 KB staging block (two-barrier bulk path)
  if constexpr (BULK && !ONE_BAR) dq_stage = al.allocate<typename S::dq_stage>() + warpid() * 1024;

  const int seq = a.seq;
  const auto [n_kv_blocks, bh_count, kb, bh, b, h, n0] = locate_kv_cta(a);
  const int g = warpid() >> 1, half = warpid() & 1;
  constexpr int BM = split_block_m<D>;
  const int mb_first = a.causal ? n0 / BM : 0;
  const int mb_end = cdiv(seq, BM);
  const bool kv_tail = n0 + KV_BLOCK_N > seq;

  const head_inputs<T> in{a.q.head(b, h), a.dout.head(b, h), a.lse + int64_t(bh) * seq, a.delta + int64_t(bh) * seq};
  float *dq_head = ATOMIC_DQ ? a.dq_accum.ptr + int64_t(bh) * (BULK ? a.dq_rows : seq) * D : nullptr;
  load_async<KV_THREADS>(sK, a.k, {b, h, n0, 0});
  load_async<KV_THREADS>(sV, a.v, {b, h, n0, 0});
  const query_block_order order(mb_first, mb_end, kb, n_kv_blocks, a.causal);
  fetch_query_block<BM>(buf[0], in, order.start);
  commit_group();
  if constexpr (ONE_BAR && !STAGED) {             // two blocks in flight
    if (order.count() > 1) fetch_query_block<BM>(buf[1], in, order.next(order.start));
    commit_group();
    wait_group<1>();
  } else {
    wait_group<0>();
  }
  __syncthreads();

  rt<T, 32, D> k_reg, v_reg;                      // used when split_kv_in_registers<D>
  if constexpr (split_kv_in_registers<D>) {
    load(k_reg, subtile<32, D>(sK, g, 0));
    load(v_reg, subtile<32, D>(sV, g, 0));
  }
  rt<float, 32, D / 2> dk, dv;
  zero(dk);
  zero(dv);

  if constexpr (STAGED) {
    // One-barrier pipeline with bulk dQ: 3 query buffers = block i (cur), block i + 1 (being fetched),
    // and the one block i - 1 used, now free: warps stage their dQ partial of block i in their own 4 KB
    // of it, and at the top of step i + 1 each warp waits for the TMA to have read its staging block and
    // refills exactly that 4 KB with its share of block i + 2... i.e. the prefetch distance is one block
    // (the copies issued at the top of step i land during phase 1 and are waited for before its barrier).
    int cur_buf = 0, cur_ps = 0;
    for (int i = 0, mb = order.start; i < order.count(); i++, mb = order.next(mb)) {
      const int m0 = mb * BM;
      const int next_buf = cur_buf == 2 ? 0 : cur_buf + 1, free_buf = next_buf == 2 ? 0 : next_buf + 1;
      bulk_wait_group_read<0>();                  // the TMA has read this warp's dQ staging of block i - 2
      __syncwarp();
      if (i + 1 < order.count()) fetch_query_block_split_warp<T, D>(buf[next_buf], in, order.next(mb));
      commit_group();
      auto &cur = buf[cur_buf];
      split_phase1<T, D>(cur, ps[cur_ps].p, ps[cur_ps].ds, sK, sV, k_reg, v_reg, a, n0, m0, kv_tail);
      wait_group<0>();                            // block i + 1 has landed (this thread's copies)
      __syncthreads();                            // P^T / dS^T of i and block i + 1 visible; i - 1 done
      mma_AB_shared<T, D, BM>(dv, ps[cur_ps].p, cur.dout, g, half);   // dV += P^T dO
      mma_AB_shared<T, D, BM>(dk, ps[cur_ps].ds, cur.q, g, half);     // dK += dS^T Q
      dq_partial_atomic<T, D, BM, dkdv_config<D>::dq_warps_m, true>(ps[cur_ps].ds, sK, dq_head, seq, m0,
                                                                     warp_share(buf[free_buf]));
      cur_buf = next_buf;
      cur_ps ^= 1;
    }
    __syncthreads();                              // all warps' phase-2 reads of sK are done
  } else if constexpr (ONE_BAR) {
    int cur_buf = 0, next2_buf = 2, cur_ps = 0;   // buffers of blocks i, i + 2; P/dS buffer of i
    for (int i = 0, mb = order.start; i < order.count(); i++, mb = order.next(mb)) {
      const int m0 = mb * BM;
      auto &cur = buf[cur_buf];
      split_phase1<T, D>(cur, ps[cur_ps].p, ps[cur_ps].ds, sK, sV, k_reg, v_reg, a, n0, m0, kv_tail);
      wait_group<0>();                            // block i + 1 has landed (this thread's copies)
      __syncthreads();                            // P^T / dS^T of i and block i + 1 visible; i - 1 done
      if (i + 2 < order.count()) fetch_query_block<BM>(buf[next2_buf], in, order.next(order.next(mb)));
      commit_group();
      mma_AB_shared<T, D, BM>(dv, ps[cur_ps].p, cur.dout, g, half);   // dV += P^T dO
      mma_AB_shared<T, D, BM>(dk, ps[cur_ps].ds, cur.q, g, half);     // dK += dS^T Q
      if constexpr (ATOMIC_DQ)
        dq_partial_atomic<T, D, BM, dkdv_config<D>::dq_warps_m, BULK>(ps[cur_ps].ds, sK, dq_head, seq, m0, dq_stage);
      cur_buf = cur_buf == 2 ? 0 : cur_buf + 1;
      next2_buf = next2_buf == 2 ? 0 : next2_buf + 1;
      cur_ps ^= 1;
    }
    __syncthreads();                              // all warps' phase-2 reads of sK are done
  } else {
    for (int i = 0, mb = order.start; i < order.count(); i++, mb = order.next(mb)) {
      const int stage = i & 1;
      const int m0 = mb * BM;
      // Buffer stage ^ 1 held block i - 1, whose last reads (phase 2) precede the previous barrier.
      if (i + 1 < order.count()) fetch_query_block<BM>(buf[stage ^ 1], in, order.next(mb));
      commit_group();
      auto &cur = buf[stage];

      split_phase1<T, D>(cur, ps[0].p, ps[0].ds, sK, sV, k_reg, v_reg, a, n0, m0, kv_tail);
      __syncthreads();                            // P^T, dS^T of the block complete

      mma_AB_shared<T, D, BM>(dv, ps[0].p, cur.dout, g, half);   // dV += P^T dO
      mma_AB_shared<T, D, BM>(dk, ps[0].ds, cur.q, g, half);     // dK += dS^T Q
      if constexpr (ATOMIC_DQ)
        dq_partial_atomic<T, D, BM, dkdv_config<D>::dq_warps_m, BULK, dq_unroll<true>>(ps[0].ds, sK, dq_head, seq, m0,
                                                                                     dq_stage);

      wait_group<0>();                            // block i + 1 has landed ...
      __syncthreads();                            // ... for everyone; P^T / dS^T / buffer reads are done
    }
  }

  // Epilogue: dK *= scale; stage through this warp's own 32 x D/2 blocks of sK / sV, 16-byte stores.
  mul(dk, dk, a.scale);
  store(subtile<32, D / 2>(sK, g, half), dk);
  store(subtile<32, D / 2>(sV, g, half), dv);
  __syncwarp();
  store_dkdv_split<T, D>(a, sK, sV, n_kv_blocks, bh_count);
  dq_bulk_drain<BULK>();
}

// ============================================================================================
// dq = scale * dq_accum (atomic path)
// ============================================================================================
// One thread per 8 consecutive elements of a row: two 16-byte fp32 loads, one 16-byte store. The 8
// elements are contiguous in both dq_accum layouts (xor32 permutes whole groups of 8 within a row).
constexpr int CONVERT_THREADS = 256;

template <typename T>
__global__ void __launch_bounds__(CONVERT_THREADS) bwd_dq_convert_kernel(const __grid_constant__ bwd_args<T> a) {
  const int D = a.dq.dim;
  const int chunks_per_row = D / 8;
  const int64_t i = int64_t(blockIdx.x) * CONVERT_THREADS + threadIdx.x;
  const int64_t rows = int64_t(a.dq.batch) * a.heads * a.seq;
  if (i >= rows * chunks_per_row) return;
  const int64_t row = i / chunks_per_row;
  const int col = int(i % chunks_per_row) * 8;
  const int t = int(row % a.seq);
  const int bh = int(row / a.seq);
  const int b = bh / a.heads, h = bh % a.heads;
  const float *head = a.dq_accum.ptr + int64_t(bh) * (a.dq_xor32 ? a.dq_rows : a.seq) * D;
  const int64_t off = a.dq_xor32 ? int64_t((t / 32) * (D / 32) + col / 32) * 1024 + xor32_offset(t % 32, col % 32)
                                 : int64_t(t) * D + col;
  const float4 *src = reinterpret_cast<const float4 *>(head + off);
  const float4 x = src[0], y = src[1];
  const float s = a.scale;
  packed_t<T> out[4] = {
      convert_pair<packed_t<T>>(make_float2(x.x * s, x.y * s)), convert_pair<packed_t<T>>(make_float2(x.z * s, x.w * s)),
      convert_pair<packed_t<T>>(make_float2(y.x * s, y.y * s)), convert_pair<packed_t<T>>(make_float2(y.z * s, y.w * s))};
  *reinterpret_cast<int4 *>(a.dq.at(b, h, t, col)) = *reinterpret_cast<const int4 *>(out);
}

// ============================================================================================
// Deterministic dQ: one CTA per (block of 64 queries, b, h)
// ============================================================================================
// Tiling: 4 warps, warp w owns queries [m0 + 16w, m0 + 16w + 16) and their dQ rows (16 x D fp32) in
// registers. The CTA walks the key blocks of 64 (causal: up to the diagonal), K / V double-buffered
// with cp.async:
//     S   = Q_w K^T        A: Q_w (ldmatrix from the CTA's Q tile)   B: K (ldmatrix, row layout)
//     P   = 2^(S c - lse2) row broadcast; masked on the diagonal block and for keys >= T
//     dP  = dO_w V^T       A: dO_w                                    B: V (row layout)
//     dS  = P * (dP - delta)
//     dQ += dS K           A: dS straight from registers              B: K (ldmatrix.trans, col layout)
// The summation order is fixed, so the result is bitwise reproducible. dQ is scaled at the end and
// staged through the warp's own rows of the Q tile for 16-byte stores. Query rows >= T are zero-filled
// (their dS is exactly 0 as in the dK/dV kernel) and never stored; keys >= T are masked to P = 0.
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

// S = X_w Y^T for this warp's 16 query rows X_w of a 64 x D shared tile (Q or dO) and a 64 x D key
// tile Y (K or V), one 16-wide slice of D at a time.
template <typename T, int D, typename XS, typename YS>
__device__ __forceinline__ void scores(rt<float, 16, DQ_BLOCK_N> &s, XS &xs, YS &ys) {
  zero(s);
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {
    rt<T, 16, 16> x_frag;
    rt<T, DQ_BLOCK_N, 16> y_frag;
    load(x_frag, subtile<16, 16>(xs, warpid(), kk));
    load_B(y_frag, subtile<DQ_BLOCK_N, 16>(ys, 0, kk));
    mma_ABt(s, x_frag, y_frag, s);
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(DQ_THREADS) bwd_dq_kernel(const __grid_constant__ bwd_args<T> a) {
  using S = dq_smem<T, D>;
  extern __shared__ __align__(128) char smem[];
  shared_allocator al(smem);
  typename S::q_tile &sQ = al.allocate<typename S::q_tile>();
  typename S::q_tile &sdO = al.allocate<typename S::q_tile>();
  typename S::kv_tile(&sK)[2] = al.allocate<typename S::kv_tile[2]>();
  typename S::kv_tile(&sV)[2] = al.allocate<typename S::kv_tile[2]>();
  typename S::vec &sLse = al.allocate<typename S::vec>();
  typename S::vec &sDelta = al.allocate<typename S::vec>();

  const int seq = a.seq;
  const int n_q_blocks = cdiv(seq, DQ_BLOCK_M);
  const int bh_count = a.q.batch * a.heads;
  // Causal: the last query blocks see the most keys; launch them first.
  const int qb = a.causal ? n_q_blocks - 1 - int(blockIdx.x) / bh_count : int(blockIdx.x) / bh_count;
  const int bh = int(blockIdx.x) % bh_count;
  const int b = bh / a.heads, h = bh % a.heads;
  const int m0 = qb * DQ_BLOCK_M;
  const int w = warpid();
  const int q0 = m0 + 16 * w;                      // first query of this warp
  const int keys_seen = a.causal ? min(m0 + DQ_BLOCK_M, seq) : seq;
  const int n_steps = cdiv(keys_seen, DQ_BLOCK_N);

  // Prologue: Q, dO, lse, delta and the first K / V tiles, one group.
  load_async<DQ_THREADS>(sQ, a.q, {b, h, m0, 0});
  load_async<DQ_THREADS>(sdO, a.dout, {b, h, m0, 0});
  const int64_t row0 = int64_t(bh) * seq + m0;
  if (w < 2) load_async<2 * WARP_THREADS>(sLse, a.lse + row0, seq - m0);
  else load_async<2 * WARP_THREADS>(sDelta, a.delta + row0, seq - m0);
  load_async<DQ_THREADS>(sK[0], a.k, {b, h, 0, 0});
  load_async<DQ_THREADS>(sV[0], a.v, {b, h, 0, 0});
  commit_group();
  wait_group<0>();
  __syncthreads();

  col_vec<16> lse2, delta;                         // this warp's 16 rows
  load(lse2, sLse.data + 16 * w, 16);
  mul(lse2, lse2, LOG2E);
  load(delta, sDelta.data + 16 * w, 16);
  rt<float, 16, D> dq;
  zero(dq);

  for (int j = 0; j < n_steps; j++) {
    const int stage = j & 1;
    const int n0 = j * DQ_BLOCK_N;
    if (j + 1 < n_steps) {
      load_async<DQ_THREADS>(sK[stage ^ 1], a.k, {b, h, n0 + DQ_BLOCK_N, 0});
      load_async<DQ_THREADS>(sV[stage ^ 1], a.v, {b, h, n0 + DQ_BLOCK_N, 0});
    }
    commit_group();

    rt<float, 16, DQ_BLOCK_N> p, ds;
    scores<T, D>(p, sQ, sK[stage]);
    row_map(p, p, lse2, [c = a.scale_log2](float x, float l) { return fmaf(x, c, -l); });
    if (a.causal && n0 + DQ_BLOCK_N - 1 > q0) make_causal(p, q0, n0);
    if (n0 + DQ_BLOCK_N > seq) mask_cols(p, n0, seq);
    exp2(p, p);

    scores<T, D>(ds, sdO, sV[stage]);
    sub_row(ds, ds, delta);
    mul(ds, ds, p);
    rt<T, 16, DQ_BLOCK_N> ds16;
    copy(ds16, ds);
#pragma unroll
    for (int kk = 0; kk < DQ_BLOCK_N / 16; kk++) {
      rt<T, 16, D, col_l> k_frag;
      load_B(k_frag, subtile<16, D>(sK[stage], kk, 0));
      mma_AB(dq, col_slice<16>(ds16, kk), k_frag, dq);
    }

    wait_group<0>();
    __syncthreads();
  }

  mul(dq, dq, a.scale);
  auto dq_stage = subtile<16, D>(sQ, w, 0);        // only this warp ever read these rows
  store(dq_stage, dq);
  __syncwarp();
  store<WARP_THREADS>(a.dq, dq_stage, {b, h, q0, 0});
}

// ============================================================================================
// launchers
// ============================================================================================
// Raise the kernel's dynamic shared-memory limit to smem bytes, launch it, and return any error.
template <typename K, typename Args>
cudaError_t launch_with_smem(K kernel, unsigned grid, int threads, int smem, cudaStream_t stream, const Args &a) {
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  kernel<<<grid, threads, smem, stream>>>(a);
  return cudaGetLastError();
}

// What the configuration choice below depends on, for the current device: `bytes`, the shared memory
// per block it may use (the device's opt-in limit, capped by the environment variable TK_SMEM_LIMIT
// (bytes) when it is set to a positive number), and `sm90`, whether TMA bulk operations exist (sm_90+).
// The cap is a testing override (read on every call): TK_SMEM_LIMIT=101376 makes an A100 / H100 / H200
// run the configurations of a 99 KB GPU (RTX 30xx / 40xx).
cudaError_t device_budget(int &bytes, bool &sm90) {
  int dev = 0, major = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if ((err = cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) != cudaSuccess) return err;
  if ((err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess) return err;
  sm90 = major >= 9;
  if (const char *env = std::getenv("TK_SMEM_LIMIT")) {
    const long cap = std::strtol(env, nullptr, 10);
    if (cap > 0 && cap < bytes) bytes = int(cap);
  }
  return cudaSuccess;
}

// The dK / dV kernel's smallest configuration (the one for 99 KB GPUs): its shared-memory bytes.
template <typename T, int D>
constexpr int dkdv_small_bytes = dkdv_smem<T, D, dkdv_small_block_m<D>>::bytes;
// The most shared memory per block the backward needs in its smallest configuration (both dtypes
// have 16-bit elements, so bf16 stands for both).
constexpr int bwd_min_smem_bytes() {
  int m = 0;
  for (int b : {dkdv_small_bytes<bf16, 64>, dkdv_small_bytes<bf16, 128>, dq_smem<bf16, 64>::bytes,
                dq_smem<bf16, 128>::bytes})
    m = b > m ? b : m;
  return m;
}
constexpr int SMALL_GPU_SMEM = 101376;  // opt-in shared memory per block of sm_86 / sm_89 GPUs (99 KB)
static_assert(bwd_min_smem_bytes() <= SMALL_GPU_SMEM, "the small configurations must fit 99 KB GPUs");

// The dK / dV kernel configurations: the first one (in this order) that the budget fits runs.
//   split_one_bar_bulk  split kernel, one-barrier pipeline, TMA bulk dQ (sm_90)  D = 128: 231,040 B
//   split_one_bar       split kernel, one-barrier pipeline (atomic dQ only)     D = 128: 231,040 B
//   split_bulk          split kernel, two-barrier pipeline, TMA bulk dQ (sm_90) D = 128: 197,760 B
//   split               split kernel, two-barrier pipeline                      D = 128: 164,992 B
//   transposed_bulk     transposed kernel, default block_m, TMA bulk dQ (sm_90) D = 64:  198,784 B
//   transposed          transposed kernel, default block_m                      D = 64:  166,016 B
//   small               transposed kernel, dkdv_small_block_m (99 KB GPUs)      D = 64: 99,456 B, D = 128: 90,496 B
// (split_* for the head dims where split_enabled, else transposed; *_bulk only on sm_90+, with atomic
// dQ, and when TK_BWD_DQ_BULK is on; split_bulk instead of split_one_bar_bulk with TK_BWD_D128_BULK_PIPE=2.)
enum class dkdv_choice { split_one_bar_bulk, split_one_bar, split_bulk, split, transposed_bulk, transposed, small };

template <typename T, int D>
dkdv_choice choose_dkdv(int budget, bool deterministic, bool sm90) {
  const bool bulk = TK_BWD_DQ_BULK != 0 && sm90 && !deterministic;
  if constexpr (split_enabled<D>) {
    if constexpr (TK_BWD_SPLIT_ONE_BARRIER && split_block_m<D> == 64) {
      if (!deterministic && split_smem<T, D, true>::bytes <= budget) {
        if (bulk && TK_BWD_D128_BULK_PIPE == 1) return dkdv_choice::split_one_bar_bulk;
        if (!bulk) return dkdv_choice::split_one_bar;
      }
    }
    if (bulk && split_smem<T, D, false>::bytes_bulk <= budget) return dkdv_choice::split_bulk;
    if (split_smem<T, D, false>::bytes <= budget) return dkdv_choice::split;
  } else {
    if (bulk && dkdv_smem<T, D>::bytes_bulk <= budget) return dkdv_choice::transposed_bulk;
    if (dkdv_smem<T, D>::bytes <= budget) return dkdv_choice::transposed;
  }
  return dkdv_choice::small;
}

template <typename T, int D>
int dkdv_choice_bytes(dkdv_choice c) {
  if constexpr (split_enabled<D>) {
    if constexpr (split_block_m<D> == 64)
      if (c == dkdv_choice::split_one_bar || c == dkdv_choice::split_one_bar_bulk) return split_smem<T, D, true>::bytes;
    if (c == dkdv_choice::split_bulk) return split_smem<T, D, false>::bytes_bulk;
    if (c == dkdv_choice::split) return split_smem<T, D, false>::bytes;
  }
  if (c == dkdv_choice::transposed_bulk) return dkdv_smem<T, D>::bytes_bulk;
  if (c == dkdv_choice::transposed) return dkdv_smem<T, D>::bytes;
  return dkdv_small_bytes<T, D>;
}

template <typename T, int D>
cudaError_t launch(const BwdParams &p, cudaStream_t stream) {
  bwd_args<T> a;
  a.q = make_gl<T>(p, p.q, p.q_s);
  a.k = make_gl<T>(p, p.k, p.k_s);
  a.v = make_gl<T>(p, p.v, p.v_s);
  a.dout = make_gl<T>(p, p.dout, p.do_s);
  a.dq = make_gl<T>(p, p.dq, p.dq_s);
  a.dk = make_gl<T>(p, p.dk, p.dk_s);
  a.dv = make_gl<T>(p, p.dv, p.dv_s);
  a.dq_rows = int(dq_accum_rows(p.T));
  const int64_t TD = int64_t(p.T) * D;
  a.dq_accum = gl<float>{p.dq_accum, p.B, p.H, p.T, D, TD * p.H, TD, D};
  a.dq_xor32 = false;
  a.lse = p.lse;
  a.delta = p.delta;
  a.seq = p.T;
  a.heads = p.H;
  a.scale = p.scale;
  a.scale_log2 = p.scale * LOG2E;
  a.causal = p.causal;
  const int64_t rows = int64_t(p.B) * p.H * p.T;
  const int bh_count = p.B * p.H;
  cudaError_t err;

  // 1. delta = rowsum(dO * O)
  {
    constexpr int rows_per_cta = DELTA_THREADS / (D / 8);
    const gl<T> o = make_gl<T>(p, p.o, p.o_s);
    bwd_delta_kernel<T, D><<<unsigned(cdiv64(rows, rows_per_cta)), DELTA_THREADS, 0, stream>>>(o, a.dout, p.delta);
    if ((err = cudaGetLastError()) != cudaSuccess) return err;
  }

  // 2. dK, dV (+ dQ partials): the largest configuration that fits the shared-memory budget
  const unsigned kv_grid = unsigned(cdiv(p.T, KV_BLOCK_N)) * unsigned(bh_count);
  int budget = 0;
  bool sm90 = false;
  if ((err = device_budget(budget, sm90)) != cudaSuccess) return err;
  const dkdv_choice choice = choose_dkdv<T, D>(budget, p.deterministic, sm90);
  const int smem = dkdv_choice_bytes<T, D>(choice);
  a.dq_xor32 = choice == dkdv_choice::split_one_bar_bulk || choice == dkdv_choice::split_bulk ||
               choice == dkdv_choice::transposed_bulk;  // the bulk path's dq_accum layout
  constexpr int small_bm = dkdv_small_block_m<D>;
  if (choice == dkdv_choice::small) {
    // 99 KB GPUs: the transposed kernel with small query blocks (see its header)
    err = p.deterministic ? launch_with_smem(bwd_dkdv_kernel<T, D, false, small_bm>, kv_grid, KV_THREADS, smem, stream, a)
                          : launch_with_smem(bwd_dkdv_kernel<T, D, true, small_bm>, kv_grid, KV_THREADS, smem, stream, a);
  } else if constexpr (split_enabled<D>) {
    if (choice == dkdv_choice::split_one_bar_bulk || choice == dkdv_choice::split_one_bar) {
      if constexpr (split_block_m<D> == 64)
        err = choice == dkdv_choice::split_one_bar_bulk
                  ? launch_with_smem(bwd_dkdv_split_kernel<T, D, true, true, true>, kv_grid, KV_THREADS, smem, stream, a)
                  : launch_with_smem(bwd_dkdv_split_kernel<T, D, true, true>, kv_grid, KV_THREADS, smem, stream, a);
    } else if (choice == dkdv_choice::split_bulk) {
      err = launch_with_smem(bwd_dkdv_split_kernel<T, D, true, false, true>, kv_grid, KV_THREADS, smem, stream, a);
    } else if (!p.deterministic) {
      err = launch_with_smem(bwd_dkdv_split_kernel<T, D, true, false>, kv_grid, KV_THREADS, smem, stream, a);
    } else {
      err = launch_with_smem(bwd_dkdv_split_kernel<T, D, false, false>, kv_grid, KV_THREADS, smem, stream, a);
    }
  } else {
    if (p.deterministic)
      err = launch_with_smem(bwd_dkdv_kernel<T, D, false>, kv_grid, KV_THREADS, smem, stream, a);
    else if (choice == dkdv_choice::transposed_bulk)
      err = launch_with_smem(bwd_dkdv_kernel<T, D, true, dkdv_block_m<D>, true>, kv_grid, KV_THREADS, smem, stream, a);
    else
      err = launch_with_smem(bwd_dkdv_kernel<T, D, true>, kv_grid, KV_THREADS, smem, stream, a);
  }
  if (err != cudaSuccess) return err;

  // 3. dQ
  if (!p.deterministic) {
    const int64_t chunks = rows * (D / 8);
    bwd_dq_convert_kernel<T><<<unsigned(cdiv64(chunks, CONVERT_THREADS)), CONVERT_THREADS, 0, stream>>>(a);
    return cudaGetLastError();
  }
  const unsigned q_grid = unsigned(cdiv(p.T, DQ_BLOCK_M)) * unsigned(bh_count);
  return launch_with_smem(bwd_dq_kernel<T, D>, q_grid, DQ_THREADS, dq_smem<T, D>::bytes, stream, a);
}

template <typename T>
cudaError_t dispatch(const BwdParams &p, cudaStream_t stream) {
  if (p.D == 64) return launch<T, 64>(p, stream);
  if (p.D == 128) return launch<T, 128>(p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace

int attention_backward_min_smem_bytes() { return bwd_min_smem_bytes(); }

int attention_backward_dkdv_smem_bytes(int D, bool deterministic) {
  int budget = 0;
  bool sm90 = false;
  if (device_budget(budget, sm90) != cudaSuccess) return -1;
  if (D == 64) return dkdv_choice_bytes<bf16, 64>(choose_dkdv<bf16, 64>(budget, deterministic, sm90));
  if (D == 128) return dkdv_choice_bytes<bf16, 128>(choose_dkdv<bf16, 128>(budget, deterministic, sm90));
  return -1;
}

cudaError_t attention_backward(const BwdParams &p, cudaStream_t stream) {
  if (p.B < 1 || p.H < 1 || p.T < 1) return cudaErrorInvalidValue;
  if (!std::isfinite(p.scale)) return cudaErrorInvalidValue;
  if (!p.q || !p.k || !p.v || !p.o || !p.dout || !p.lse || !p.dq || !p.dk || !p.dv || !p.delta)
    return cudaErrorInvalidValue;
  if (!p.deterministic && !p.dq_accum) return cudaErrorInvalidValue;
  // Grids are 1-D over (blocks x B x H); keep them within 2^31 - 1 CTAs.
  if (int64_t(p.B) * p.H * ((int64_t(p.T) + 63) / 64) > 0x7fffffffLL) return cudaErrorInvalidValue;
  if (p.dtype == DType::bf16) return dispatch<bf16>(p, stream);
  if (p.dtype == DType::fp16) return dispatch<half>(p, stream);
  return cudaErrorInvalidValue;
}

}  // namespace tk_attn
