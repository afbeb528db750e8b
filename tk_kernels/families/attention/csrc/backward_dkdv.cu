// Attention backward, dK / dV kernel ("transposed": each warp owns 16 keys and computes S^T, dP^T
// directly, so P^T and dS^T are mma A operands straight from registers). Runs at D = 64 (all
// configurations) and, with 16-query blocks, at D = 128 on 99 KB GPUs. Algorithm overview: backward.cu.
//
// dK, dV (and atomic dQ partials): one CTA per (block of 128 keys, b, h)
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
// Dropout (DROPOUT kernels; p = 0 runs the code above unchanged): per step, after the masking branch (so
// in one basic block with the dP^T and dV / dK mma, which the scheduler interleaves the Philox work with),
// dropout_bwd_k draws the step's Philox words one 32-query column at a time and, per element,
//     P~ = keep ? P : 0 (dV's operand),   dS' = P~ dP - P (1 - p) delta = (1 - p) dS
// (one select, one multiply, one fma; p = 0: a subtract and a multiply); dK and dV are scaled by 1 / (1 - p)
// in the epilogue, dQ by the convert kernel (backward.cu). The warp's 16 keys are fixed for the whole
// kernel, so three of the ten Philox rounds are mostly hoisted (dropout_prefix_k, per key row in shared
// memory, written in the prologue): 16 of 20 products per group left. Two keep tests per 32-bit word
// (dropout_keep_pair). SASS of the main loop per 128-query block, D = 64 bulk bf16 sm_90a: 2111
// instructions (p = 0: 1570; the keep_bits version before, which packed the bits before S^T and drew
// all words there, 2279). All 14 dropout instantiations spill-free on sm_80 and sm_90a.
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
// opt-in shared memory per block fits (the table in configs.cu):
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
//
// Measured (H200, bench/RESULTS.md, commit 2071b28 and the history before it): the whole D = 64 backward
// runs 1.06-1.30x SDPA flash (bf16, B*H*T = 196K-262K). Choices that won against the alternatives that
// were measured and then removed (their code is in git history before this file was split, commit
// 1674171, as TK_BWD_* macros):
//   * 128-query blocks, 64-query steps, K / V rows in registers, 1 CTA (8 warps) per SM: the 64-query
//     block with 2 CTAs per SM (<= 128 registers) and 32-query steps were slower.
//   * the split kernel (backward_dkdv_split.cu) measured 3-4% slower at D = 64.
//   * dQ partials by TMA bulk reduction on sm_90 (dq_partial_atomic): +5-10% for the whole backward over
//     red.add (the red.add bursts stalled the warps: ~15% of the kernel's stall samples in ncu).
//   * instruction overhead, measured together with the bulk dQ path (2071b28): lane_xor shared addresses on
//     sm_90 (backward.cuh, BWD_ADDR), the fully unrolled dQ key loop, 8-byte lse / delta loads, and the
//     two query steps of a block unrolled (hot path 1242 -> 1163 instructions per block with the others).
//   * non-causal CTAs start their walk over the query blocks at a block proportional to their key block
//     (query_block_order), so CTAs of one head do not add into the same dq_accum rows in lock-step.
// All configurations: <= 255 registers, no spills on sm_80 and sm_90a.
//
// This file also holds bwd_dq_kernel, the deterministic path's dQ kernel (see its comment). It would
// sit naturally in backward_dq.cu, but compiled in a translation unit of its own NVVM schedules its
// prologue differently (same instruction count, different order), and the shipped kernels are kept
// SASS-identical to the measured build (dev/sass_diff.py).
#include "backward.cuh"
#include "configs.cuh"

namespace tk_attn {
namespace {

using namespace tk;

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
// The dropout of a DROPOUT kernel's CTA: its key, head and 1 / (1 - p). Kept in (static) shared memory,
// written once per CTA, read with constant-address loads where needed: in registers these 6 words cost
// the sm_80 D = 64 kernel a 16-byte spill. Only the DROPOUT kernels reference kv_drop, so only they
// allocate it.
struct kv_dropout {
  dropout_key key;
  uint32_t thr16;                        // threshold << 16 (dropout_keep_pair)
  float keep_prob;                       // 1 - p (as 1 / keep_scale): delta_s = keep_prob delta
  uint32_t prefix_a;                     // dropout_prefix_k: a is the CTA's, b, c, e, f each key row's
  uint4 prefix[KV_WARPS][8];             // [warp][g]: (b, c, e, f) of key row key0 + g
};
__shared__ kv_dropout kv_drop;

// One query block mb (rows [block_m mb, block_m (mb + 1))) against the CTA's keys, using buffer `stage`:
// prefetch the next block of the CTA's order (mb_next, -1 if none) into the other buffer, accumulate dV
// and dK, write dS^T, then ONE barrier (this block's dS^T is complete and the next block has landed, for
// every warp), then this block's dQ partial (ATOMIC_DQ). Why one barrier suffices: Q / dO / lse / delta
// of buffer `stage` are only read before it, so the next step may refill that buffer right away; dS^T
// is double-buffered, so its next overwrite (two steps on) comes after the next step's barrier, which
// every warp reaches only once its dQ reads of this step are done.
// The query-step loop is unrolled by 2: both steps of a D = 64 block (offsets become immediates; the lane
// offsets are not rebuilt for the second step).
// DROPOUT: dS'^T = P^T (keep dP^T - (1 - p) delta) = (1 - p) dS^T (dropout_bwd_k), dV takes the dropped P^T.
template <typename T, int D, bool ATOMIC_DQ, int BLOCK_M, bool BULK, bool DROPOUT>
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

#pragma unroll 2
  for (int hq = 0; hq < BM / QS; hq++) {          // query steps of QS within the block
    const int q0 = m0 + hq * QS;
    if (a.causal && c.key0 > q0 + QS - 1) {         // all of this warp's keys are after all queries: P = 0
      if constexpr (ATOMIC_DQ) {
        rt<T, 16, QS> zeros;
        zero(zeros);
        store<BWD_ADDR>(subtile<16, QS>(cur.dsT, w, hq), zeros);
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
    if constexpr (DROPOUT) {
      // dV gets the dropped P (scaled by 1 / (1 - p) at the end), dS^T its (1 - p) multiple (dK, dQ scaled at the end)
      // (the step's Philox words are drawn in there, after the masking branch: in one basic block with the
      // dP^T and dV / dK mma, which the scheduler interleaves them with)
      mul(delta, delta, kv_drop.keep_prob);
      const uint4 pre = kv_drop.prefix[w][laneid() >> 2];
      dropout_bwd_k(p, ds, kv_drop.key, {kv_drop.prefix_a, pre.x, pre.y, pre.z, pre.w}, q0, kv_drop.thr16, delta);
    } else {
      sub_col(ds, ds, delta);
      mul(ds, ds, p);
    }

    rt<T, 16, QS> p16, ds16;
    copy(p16, p);
    copy(ds16, ds);
    if constexpr (ATOMIC_DQ) store<BWD_ADDR>(subtile<16, QS>(cur.dsT, w, hq), ds16);

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

template <typename T, int D, bool ATOMIC_DQ, int BLOCK_M = dkdv_block_m<D>, bool BULK = false, bool DROPOUT = false>
__global__ void __launch_bounds__(KV_THREADS, dkdv_config<D, BLOCK_M>::min_blocks)
bwd_dkdv_kernel(const __grid_constant__ bwd_args_t<T, DROPOUT> a) {
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
  const head_inputs<T> in{a.q.matrix(b, h), a.dout.matrix(b, h), a.lse + int64_t(bh) * seq, a.delta + int64_t(bh) * seq};
  const query_block_order order(mb_first, mb_end, kb, n_kv_blocks, a.causal);
  fetch_query_block<BLOCK_M>(buf[0], in, order.start);
  commit_group();
  if constexpr (DROPOUT) {  // visible after this barrier
    if (laneid() < 8) {
      const dropout_key d = bwd_dropout_key(a);
      const philox_k_prefix pr = dropout_prefix_k(d, bh, key0 + laneid());
      kv_drop.prefix[w][laneid()] = make_uint4(pr.b, pr.c, pr.e, pr.f);
      if (threadIdx.x == 0) {
        kv_drop.key = d;
        kv_drop.thr16 = d.threshold << 16;
        kv_drop.keep_prob = 1.f / a.drop.keep_scale;
        kv_drop.prefix_a = pr.a;
      }
    }
  }
  wait_group<0>();
  __syncthreads();

  rt<T, 16, D> k_reg, v_reg;                      // used when cfg::kv_in_registers
  if constexpr (cfg::kv_in_registers) {
    load<BWD_ADDR>(k_reg, subtile<16, D>(sK, w, 0));
    load<BWD_ADDR>(v_reg, subtile<16, D>(sV, w, 0));
  }
  rt<float, 16, D> dk, dv;
  zero(dk);
  zero(dv);

  const dkdv_tiles<T, D, BLOCK_M> sm{sK, sV, buf, dq_stage};
  float *dq_head = ATOMIC_DQ ? a.dq_accum.ptr + int64_t(bh) * (BULK ? a.dq_rows : seq) * D : nullptr;
  const kv_block_pos<T> pos{in, dq_head, n0, key0, kv_tail};
  for (int i = 0, mb = order.start; i < order.count(); i++, mb = order.next(mb))
    dkdv_step<T, D, ATOMIC_DQ, BLOCK_M, BULK, DROPOUT>(sm, a, pos, mb, i + 1 < order.count() ? order.next(mb) : -1,
                                                       i & 1, k_reg, v_reg, dk, dv);

  // Epilogue: dK *= scale; stage both through this warp's own rows of sK / sV (after the barrier no
  // warp reads K any more), then 16-byte stores; keys >= T are skipped.
  __syncthreads();
  if constexpr (DROPOUT) {
    mul(dk, dk, a.scale * a.drop.keep_scale);   // dS' = (1 - p) dS (dropout_bwd_k)
    mul(dv, dv, a.drop.keep_scale);
  } else {
    mul(dk, dk, a.scale);
  }
  auto dk_stage = subtile<16, D>(sK, w, 0);
  auto dv_stage = subtile<16, D>(sV, w, 0);
  store<BWD_ADDR>(dk_stage, dk);
  store<BWD_ADDR>(dv_stage, dv);
  __syncwarp();
  store_dkdv_rows<T, D>(a, sK, sV, n_kv_blocks, bh_count);
  dq_bulk_drain<BULK>();
}

// ============================================================================================
// Deterministic dQ: one CTA per (block of 64 queries, b, h)
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
// Shared memory: 49,792 B (D = 64) / 98,944 B (D = 128), which fits every supported GPU.

// S = X_w Y^T for this warp's 16 query rows X_w of a 64 x D shared tile (Q or dO) and a 64 x D key
// tile Y (K or V), one 16-wide slice of D at a time.
template <typename T, int D, typename XS, typename YS>
__device__ __forceinline__ void scores(rt<float, 16, DQ_BLOCK_N> &s, XS &xs, YS &ys) {
  zero(s);
#pragma unroll
  for (int kk = 0; kk < D / 16; kk++) {
    rt<T, 16, 16> x_frag;
    rt<T, DQ_BLOCK_N, 16> y_frag;
    load<BWD_ADDR>(x_frag, subtile<16, 16>(xs, warpid(), kk));
    load_B<BWD_ADDR>(y_frag, subtile<DQ_BLOCK_N, 16>(ys, 0, kk));
    mma_ABt(s, x_frag, y_frag, s);
  }
}

template <typename T, int D, bool DROPOUT = false>
__global__ void __launch_bounds__(DQ_THREADS) bwd_dq_kernel(const __grid_constant__ bwd_args_t<T, DROPOUT> a) {
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
  const int bh_count = a.q.shape[0] * a.heads;
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
  dropout_key drop_key{};
  if constexpr (DROPOUT) drop_key = bwd_dropout_key(a);

  for (int j = 0; j < n_steps; j++) {
    const int stage = j & 1;
    const int n0 = j * DQ_BLOCK_N;
    if (j + 1 < n_steps) {
      load_async<DQ_THREADS>(sK[stage ^ 1], a.k, {b, h, n0 + DQ_BLOCK_N, 0});
      load_async<DQ_THREADS>(sV[stage ^ 1], a.v, {b, h, n0 + DQ_BLOCK_N, 0});
    }
    commit_group();

    keep_bits<rt<float, 16, DQ_BLOCK_N>> keep;
    if constexpr (DROPOUT) dropout_bits_q(keep, drop_key, bh, q0, n0);
    rt<float, 16, DQ_BLOCK_N> p, ds;
    scores<T, D>(p, sQ, sK[stage]);
    row_map(p, p, lse2, [c = a.scale_log2](float x, float l) { return fmaf(x, c, -l); });
    if (a.causal && n0 + DQ_BLOCK_N - 1 > q0) make_causal(p, q0, n0);
    if (n0 + DQ_BLOCK_N > seq) mask_cols(p, n0, seq);
    exp2(p, p);

    scores<T, D>(ds, sdO, sV[stage]);
    if constexpr (DROPOUT) {
      dropout_ds(ds, p, keep, a.drop.keep_scale, [&](rt<float, 16, DQ_BLOCK_N> &x) { sub_row(x, x, delta); });
    } else {
      sub_row(ds, ds, delta);
      mul(ds, ds, p);
    }
    rt<T, 16, DQ_BLOCK_N> ds16;
    copy(ds16, ds);
#pragma unroll
    for (int kk = 0; kk < DQ_BLOCK_N / 16; kk++) {
      rt<T, 16, D, col_l> k_frag;
      load_B<BWD_ADDR>(k_frag, subtile<16, D>(sK[stage], kk, 0));
      mma_AB(dq, col_slice<16>(ds16, kk), k_frag, dq);
    }

    wait_group<0>();
    __syncthreads();
  }

  mul(dq, dq, a.scale);
  auto dq_stage = subtile<16, D>(sQ, w, 0);        // only this warp ever read these rows
  store<BWD_ADDR>(dq_stage, dq);
  __syncwarp();
  store<WARP_THREADS>(a.dq, dq_stage, {b, h, q0, 0});
}

}  // namespace

template <typename T, bool DROPOUT>
cudaError_t launch_dkdv_transposed(const dkdv_launch &c, const bwd_args_t<T, DROPOUT> &a, unsigned grid,
                                   cudaStream_t stream) {
  const int smem = c.smem_bytes;
  constexpr bool X = DROPOUT;
  if (c.D == 64 && c.block_m == dkdv_block_m<64>) {
    if (c.dq == dq_mode::bulk)
      return launch_with_smem(bwd_dkdv_kernel<T, 64, true, dkdv_block_m<64>, true, X>, grid, KV_THREADS, smem, stream, a);
    if (c.dq == dq_mode::red_add)
      return launch_with_smem(bwd_dkdv_kernel<T, 64, true, dkdv_block_m<64>, false, X>, grid, KV_THREADS, smem, stream, a);
    return launch_with_smem(bwd_dkdv_kernel<T, 64, false, dkdv_block_m<64>, false, X>, grid, KV_THREADS, smem, stream, a);
  }
  if (c.D == 64 && c.block_m == dkdv_small_block_m<64> && c.dq != dq_mode::bulk)
    return c.dq == dq_mode::none
               ? launch_with_smem(bwd_dkdv_kernel<T, 64, false, dkdv_small_block_m<64>, false, X>, grid, KV_THREADS, smem,
                                  stream, a)
               : launch_with_smem(bwd_dkdv_kernel<T, 64, true, dkdv_small_block_m<64>, false, X>, grid, KV_THREADS, smem,
                                  stream, a);
  if (c.D == 128 && c.block_m == dkdv_small_block_m<128> && c.dq != dq_mode::bulk)
    return c.dq == dq_mode::none
               ? launch_with_smem(bwd_dkdv_kernel<T, 128, false, dkdv_small_block_m<128>, false, X>, grid, KV_THREADS,
                                  smem, stream, a)
               : launch_with_smem(bwd_dkdv_kernel<T, 128, true, dkdv_small_block_m<128>, false, X>, grid, KV_THREADS,
                                  smem, stream, a);
  return cudaErrorInvalidValue;
}

template <typename T, bool DROPOUT>
cudaError_t launch_dq_deterministic(const bwd_args_t<T, DROPOUT> &a, int D, cudaStream_t stream) {
  const unsigned grid = unsigned(cdiv(a.seq, DQ_BLOCK_M)) * unsigned(a.q.shape[0] * a.heads);
  if (D == 64)
    return launch_with_smem(bwd_dq_kernel<T, 64, DROPOUT>, grid, DQ_THREADS, dq_smem<T, 64>::bytes, stream, a);
  if (D == 128)
    return launch_with_smem(bwd_dq_kernel<T, 128, DROPOUT>, grid, DQ_THREADS, dq_smem<T, 128>::bytes, stream, a);
  return cudaErrorInvalidValue;
}

template cudaError_t launch_dkdv_transposed<bf16, false>(const dkdv_launch &, const bwd_args<bf16> &, unsigned, cudaStream_t);
template cudaError_t launch_dkdv_transposed<half, false>(const dkdv_launch &, const bwd_args<half> &, unsigned, cudaStream_t);
template cudaError_t launch_dkdv_transposed<bf16, true>(const dkdv_launch &, const bwd_dropout_args<bf16> &, unsigned,
                                                        cudaStream_t);
template cudaError_t launch_dkdv_transposed<half, true>(const dkdv_launch &, const bwd_dropout_args<half> &, unsigned,
                                                        cudaStream_t);
template cudaError_t launch_dq_deterministic<bf16, false>(const bwd_args<bf16> &, int, cudaStream_t);
template cudaError_t launch_dq_deterministic<half, false>(const bwd_args<half> &, int, cudaStream_t);
template cudaError_t launch_dq_deterministic<bf16, true>(const bwd_dropout_args<bf16> &, int, cudaStream_t);
template cudaError_t launch_dq_deterministic<half, true>(const bwd_dropout_args<half> &, int, cudaStream_t);

}  // namespace tk_attn
