// Attention backward, dK / dV kernel ("split": P^T and dS^T staged in shared memory), D = 128 on GPUs with
// >= 161 KB of shared memory per block. Algorithm overview: backward.cu.
//
// dK, dV (and atomic dQ partials), split-phase variant: P^T and dS^T staged in shared memory
// Same grid, 128-key blocks and ragged-T handling as bwd_dkdv_kernel (backward_dkdv.cu); BM = 64-query blocks.
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
// Warp w handles key group w / 2 in both phases (query half / D half w % 2).
// Two-barrier pipeline: because phase 2 still reads Q / dO, the next block is prefetched only after
// the previous block's second barrier (into the buffer that block used); P^T / dS^T need a single
// buffer. The one-barrier pipeline below trades shared memory for the second barrier.
// Shared memory (D = 128): see the configurations in configs.cu.
// One-barrier pipeline (ONE_BAR; 3 query buffers + 2 P^T/dS^T buffers, 225 KB, so H100 / H200 only):
//   step mb: phase 1 (buffer mb%3 -> P/dS mb%2); wait for block mb+1; barrier; prefetch block mb+2 into
//   buffer (mb+2)%3 = (mb-1)%3 (phase 2 of mb-1 is done by everyone: it precedes this barrier);
//   phase 2 (buffer mb%3, P/dS mb%2). P/dS mb%2 is rewritten in phase 1 of mb+2, after barrier mb+1.
// With the TMA bulk dQ path on sm_90 the one-barrier pipeline stages each warp's dQ partial in the 4 KB of
// the free query buffer that it refills next (STAGED below), so it needs no extra shared memory.
// Both pipelines run the same arithmetic in the same order, so dK / dV stay bitwise equal; the
// deterministic path always uses the two-barrier pipeline.
//
// Measured (H200, bench/RESULTS.md, "attention ... commit 2071b28"): the whole D = 128 backward runs
// 1.02-1.13x SDPA flash (1.02x at (1,16,16384,128), both masks).
// Choices that won (alternatives removed; their code is in git history as TK_BWD_* macros, commit 1674171):
//   * this kernel over the transposed one at D = 128: +7-10%.
//   * one-barrier over two-barrier pipeline: +3-4% at D = 128 (the launch table falls back to two barriers
//     where 225 KB do not fit).
//   * bulk dQ, one-barrier staged pipeline, on sm_90: together with the address choices (BWD_ADDR) and the
//     fully unrolled dQ key loop, the measured default of 2071b28 (the two-barrier bulk variant with a
//     separate 32 KB staging area stays in the table for budgets between 193 and 225 KB).
//   * the two-barrier kernel's dQ key loop unrolled 4 (not 8: spills), the A100 path.
// All configurations: <= 255 registers, no spills on sm_80 and sm_90a.
#include "backward.cuh"
#include "configs.cuh"

namespace tk_attn {
namespace {

using namespace tk;


// acc (32 keys x D/2) += A_g Y[:, half] with A_g rows [32 g, 32 g + 32) of a [key][query] shared
// tile (P^T or dS^T; ldmatrix, row layout = A operand) and Y the BM x D query-side tile (dO or Q;
// ldmatrix.trans, col layout = B operand), 16 queries at a time.
template <typename T, int D, int BM, typename PS, typename YS>
__device__ __forceinline__ void mma_AB_shared(rt<float, 32, D / 2> &acc, PS &ps, YS &ys, int g, int half) {
#pragma unroll
  for (int kk = 0; kk < BM / 16; kk++) {
    rt<T, 32, 16> a_frag;
    rt<T, 16, D / 2, col_l> y_frag;
    load<BWD_ADDR>(a_frag, subtile<32, 16>(ps, g, kk));
    load_B<BWD_ADDR>(y_frag, subtile<16, D / 2>(ys, kk, half));
    mma_AB(acc, a_frag, y_frag, acc);
  }
}

// The dropout of a DROPOUT kernel's CTA: its key, head and 1 / (1 - p). Kept in (static) shared memory,
// written once per CTA and read by every phase 1 with constant-address loads: in registers these 6 words
// cost the A100 / deterministic (two-barrier) variants an 8-byte spill. Only the DROPOUT kernels reference
// split_drop, so only they allocate it.
struct split_dropout {
  dropout_key key;
  int bh;
  float keep_scale;
};
__shared__ split_dropout split_drop;

// Phase 1 of one query block for this warp's 32 keys x BM/2 queries: P^T and dS^T into shared memory.
// DROPOUT: the stored P^T is the dropped one (it only feeds dV, scaled by 1 / (1 - p) at the end).
template <typename T, int D, bool DROPOUT = false, typename Buf, typename PS>
__device__ __forceinline__ void split_phase1(const Buf &cur, PS &sPt, PS &sdSt, const split_kv_tile<T, D> &sK,
                                             const split_kv_tile<T, D> &sV, const rt<T, 32, D> &k_reg,
                                             const rt<T, 32, D> &v_reg, const bwd_args<T> &a, int n0, int m0,
                                             bool kv_tail) {
  constexpr bool REGS = false;                   // D = 128: K / V slices re-read from shared memory
  constexpr int QP = SPLIT_BLOCK_M / 2;       // queries per warp
  const int g = warpid() >> 1, qh = warpid() & 1;
  const int key0 = n0 + 32 * g, q0 = m0 + QP * qh;
  auto pt = subtile<32, QP>(sPt, g, qh);
  auto dst = subtile<32, QP>(sdSt, g, qh);
  if (a.causal && key0 > q0 + QP - 1) {          // every key after every query: P = dS = 0
    rt<T, 32, QP> zeros;
    zero(zeros);
    store<BWD_ADDR>(pt, zeros);
    store<BWD_ADDR>(dst, zeros);
    return;
  }
  keep_bits<rt<float, 32, QP>> keep;
  if constexpr (DROPOUT) dropout_bits_k<rt<float, 32, QP>, true>(keep, split_drop.key, split_drop.bh, key0, q0);
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
  if constexpr (DROPOUT) {
    dropout_ds(ds, p, keep, split_drop.keep_scale, [&](rt<float, 32, QP> &x) { sub_col(x, x, delta); });
    apply_bits(p, keep, zero_dropped{});
  } else {
    sub_col(ds, ds, delta);
    mul(ds, ds, p);
  }
  store<BWD_ADDR>(pt, p);                                   // fp32 -> 16-bit on the way
  store<BWD_ADDR>(dst, ds);
}

template <typename T, int D>
__device__ __noinline__ void store_dkdv_split(const bwd_args<T> &a, const split_kv_tile<T, D> &sK,
                                              const split_kv_tile<T, D> &sV, int n_kv_blocks,
                                              int bh_count) {
  int kb, bh;
  kv_block_coords(n_kv_blocks, bh_count, a.causal, kb, bh);
  const int b = bh / a.heads, h = bh % a.heads, g = warpid() >> 1, half = warpid() & 1;
  const coord<4> c{b, h, kb * KV_BLOCK_N + 32 * g, (D / 2) * half};
  store<WARP_THREADS>(a.dk, subtile<32, D / 2>(sK, g, half), c);
  store<WARP_THREADS>(a.dv, subtile<32, D / 2>(sV, g, half), c);
}

// The same copies split by warp (D = 128, 64-query blocks): warp w loads rows [16 (w % 4), 16 (w % 4) + 16) of
// Q (w < 4) or dO (w >= 4), a contiguous 4 KB of the buffer, which is also the block the one-barrier bulk
// pipeline uses as that warp's dQ staging (so a warp only waits for its own bulk reduction before refilling).
template <typename T, int D, typename Buf>
__device__ __forceinline__ void fetch_query_block_split_warp(Buf &buf, const head_inputs<T> &in, int mb) {
  static_assert(D == 128 && SPLIT_BLOCK_M == 64, "per-warp query-block fetch: D = 128, 64-query blocks");
  const int m0 = mb * SPLIT_BLOCK_M;
  const int w = warpid(), r = 16 * (w & 3);
  if (w < 4) load_async<WARP_THREADS>(subtile<16, D>(buf.q, w & 3, 0), in.q, {0, 0, m0 + r, 0});
  else load_async<WARP_THREADS>(subtile<16, D>(buf.dout, w & 3, 0), in.dout, {0, 0, m0 + r, 0});
  fetch_query_stats<SPLIT_BLOCK_M>(buf, in, mb);
}
// This warp's 4 KB of a query buffer in that split (its dQ staging block in the one-barrier bulk pipeline).
template <typename Buf>
__device__ __forceinline__ float *warp_share(Buf &buf) {
  const int w = warpid();
  auto *tile = w < 4 ? buf.q.data : buf.dout.data;
  return reinterpret_cast<float *>(tile + 16 * (w & 3) * Buf::q_cols);
}

template <typename T, int D, bool ATOMIC_DQ, bool ONE_BAR, bool BULK = false, bool DROPOUT = false>
__global__ void __launch_bounds__(KV_THREADS, 1) bwd_dkdv_split_kernel(const __grid_constant__ bwd_args_t<T, DROPOUT> a) {
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
  constexpr int BM = SPLIT_BLOCK_M;
  const int mb_first = a.causal ? n0 / BM : 0;
  const int mb_end = cdiv(seq, BM);
  const bool kv_tail = n0 + KV_BLOCK_N > seq;

  const head_inputs<T> in{a.q.matrix(b, h), a.dout.matrix(b, h), a.lse + int64_t(bh) * seq, a.delta + int64_t(bh) * seq};
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
  if constexpr (DROPOUT) {
    if (threadIdx.x == 0) split_drop = {bwd_dropout_key(a), bh, a.drop.keep_scale};  // visible after this barrier
  }
  __syncthreads();

  rt<T, 32, D> k_reg, v_reg;                      // unused at D = 128 (scores_t reads sK / sV)
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
      split_phase1<T, D, DROPOUT>(cur, ps[cur_ps].p, ps[cur_ps].ds, sK, sV, k_reg, v_reg, a, n0, m0, kv_tail);
      wait_group<0>();                            // block i + 1 has landed (this thread's copies)
      __syncthreads();                            // P^T / dS^T of i and block i + 1 visible; i - 1 done
      mma_AB_shared<T, D, BM>(dv, ps[cur_ps].p, cur.dout, g, half);   // dV += P^T dO
      mma_AB_shared<T, D, BM>(dk, ps[cur_ps].ds, cur.q, g, half);     // dK += dS^T Q
      dq_partial_atomic<T, D, BM, SPLIT_DQ_WARPS_M, true>(ps[cur_ps].ds, sK, dq_head, seq, m0,
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
      split_phase1<T, D, DROPOUT>(cur, ps[cur_ps].p, ps[cur_ps].ds, sK, sV, k_reg, v_reg, a, n0, m0, kv_tail);
      wait_group<0>();                            // block i + 1 has landed (this thread's copies)
      __syncthreads();                            // P^T / dS^T of i and block i + 1 visible; i - 1 done
      if (i + 2 < order.count()) fetch_query_block<BM>(buf[next2_buf], in, order.next(order.next(mb)));
      commit_group();
      mma_AB_shared<T, D, BM>(dv, ps[cur_ps].p, cur.dout, g, half);   // dV += P^T dO
      mma_AB_shared<T, D, BM>(dk, ps[cur_ps].ds, cur.q, g, half);     // dK += dS^T Q
      if constexpr (ATOMIC_DQ)
        dq_partial_atomic<T, D, BM, SPLIT_DQ_WARPS_M, BULK>(ps[cur_ps].ds, sK, dq_head, seq, m0, dq_stage);
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

      split_phase1<T, D, DROPOUT>(cur, ps[0].p, ps[0].ds, sK, sV, k_reg, v_reg, a, n0, m0, kv_tail);
      __syncthreads();                            // P^T, dS^T of the block complete

      mma_AB_shared<T, D, BM>(dv, ps[0].p, cur.dout, g, half);   // dV += P^T dO
      mma_AB_shared<T, D, BM>(dk, ps[0].ds, cur.q, g, half);     // dK += dS^T Q
      if constexpr (ATOMIC_DQ)
        dq_partial_atomic<T, D, BM, SPLIT_DQ_WARPS_M, BULK, dq_unroll<true>>(ps[0].ds, sK, dq_head, seq, m0,
                                                                                     dq_stage);

      wait_group<0>();                            // block i + 1 has landed ...
      __syncthreads();                            // ... for everyone; P^T / dS^T / buffer reads are done
    }
  }

  // Epilogue: dK *= scale; stage through this warp's own 32 x D/2 blocks of sK / sV, 16-byte stores.
  mul(dk, dk, a.scale);
  if constexpr (DROPOUT) mul(dv, dv, a.drop.keep_scale);
  store<BWD_ADDR>(subtile<32, D / 2>(sK, g, half), dk);
  store<BWD_ADDR>(subtile<32, D / 2>(sV, g, half), dv);
  __syncwarp();
  store_dkdv_split<T, D>(a, sK, sV, n_kv_blocks, bh_count);
  dq_bulk_drain<BULK>();
}

}  // namespace

template <typename T, bool X>
cudaError_t launch_dkdv_split(const dkdv_launch &c, const bwd_args_t<T, X> &a, unsigned grid, cudaStream_t stream) {
  constexpr int D = 128;
  const int smem = c.smem_bytes;
  if (c.D != D || c.block_m != SPLIT_BLOCK_M) return cudaErrorInvalidValue;
  if (c.kernel == dkdv_kernel::split_one_barrier) {
    if (c.dq == dq_mode::bulk)
      return launch_with_smem(bwd_dkdv_split_kernel<T, D, true, true, true, X>, grid, KV_THREADS, smem, stream, a);
    if (c.dq == dq_mode::red_add) {
      if constexpr (X) return cudaErrorInvalidValue;  // no dropout variant (configs.cu)
      else return launch_with_smem(bwd_dkdv_split_kernel<T, D, true, true>, grid, KV_THREADS, smem, stream, a);
    }
    return cudaErrorInvalidValue;
  }
  if (c.dq == dq_mode::bulk) {
    if constexpr (X) return cudaErrorInvalidValue;  // no dropout variant (configs.cu: it spilled; select_dkdv skips it)
    else return launch_with_smem(bwd_dkdv_split_kernel<T, D, true, false, true>, grid, KV_THREADS, smem, stream, a);
  }
  if (c.dq == dq_mode::red_add) {
    if constexpr (X) return cudaErrorInvalidValue;  // no dropout variant (configs.cu)
    else return launch_with_smem(bwd_dkdv_split_kernel<T, D, true, false>, grid, KV_THREADS, smem, stream, a);
  }
  return launch_with_smem(bwd_dkdv_split_kernel<T, D, false, false, false, X>, grid, KV_THREADS, smem, stream, a);
}
template cudaError_t launch_dkdv_split<bf16, false>(const dkdv_launch &, const bwd_args<bf16> &, unsigned, cudaStream_t);
template cudaError_t launch_dkdv_split<half, false>(const dkdv_launch &, const bwd_args<half> &, unsigned, cudaStream_t);
template cudaError_t launch_dkdv_split<bf16, true>(const dkdv_launch &, const bwd_dropout_args<bf16> &, unsigned,
                                                   cudaStream_t);
template cudaError_t launch_dkdv_split<half, true>(const dkdv_launch &, const bwd_dropout_args<half> &, unsigned,
                                                   cudaStream_t);

}  // namespace tk_attn
