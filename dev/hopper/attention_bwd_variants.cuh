// dev/: variants of the sm_90a attention backward (csrc/hopper_backward.cu), timed beside the shipped
// kernel by dev/hopper/check_attention_bwd_variants.py (not shipped). This header compiles the family's
// hopper_backward.cu without its entry point (TK_HBWD_DEV_VARIANTS: none of the shipped instantiations
// are built here) and adds attention_bwd_dev_kernel<T, D, CAUSAL>: the shipped kernel's algorithm,
// tiling and arithmetic, with these changes.
// Measured (H200, bf16, backward alone, TFLOP/s; bench/RESULTS.md session 4 call 3): both variants give the
// shipped gradients (14 cases, rel-L2 <= 3e-5); pipe / shipped: 0.98 / 0.96 / 1.00 / 0.94 at D = 64
// ((16,12,1024) causal, full; (8,16,2048) causal, full), 1.01 / 1.10 / 1.01 / 1.13 at D = 128 ((8,16,2048),
// (4,16,4096)); pipe+group / shipped: 1.04 / 0.96 / 1.12 / 0.94 and 1.36 / 1.07 / 0.99 / 1.11. Best vs cuDNN:
// 0.82-0.93x. So: group the causal launch order at every D, pipe at D = 128 only.
//
// Variant 1 ("pipe"):
//   * Rotated query-block loop: S^T = K_c Q^T of block j + 1 is issued at the end of block j, right
//     after dQ^T(j) (the prologue issues S^T(0)). The consumer then waits for dQ^T(j) only and does
//     its xor32 staging (32 scattered 4-byte shared stores, a proxy fence, two warpgroup barriers and
//     the two bulk reductions) while S^T(j + 1) runs on the tensor cores; it waits for S^T(j + 1)
//     last, and block j + 1 starts with dP^T's issue and the exponentials straight away. Shipped:
//     wait for all of block j's GEMMs, stage, then issue S^T and dP^T of j + 1 and wait for S^T, so
//     the tensor cores idle through the staging and S^T's latency once per block, and at D = 128 both
//     consumers do so at the same moment (they meet at the dS^T barrier just before).
//   * qd_empty (Q / dO / lse2 / Delta slot free) is signalled once dV and dK of the block retire
//     (before dQ^T does: dQ^T reads only K and dS^T), and there is one more slot: D = 64: 4 stages,
//     162 KB; D = 128: 3 stages, 226.5 KB of the 227 KB. (With the shipped 2 stages, D = 128 spilled
//     8-28 bytes of scalars in this loop; with 3 none.)
//   * ptxas constraints found on the way (-Xptxas -v warnings, both serialize every wgmma): no wgmma
//     may be in flight across the loop's back edge (C7514: the first version carried dQ^T(j) into
//     block j + 1), and no wgmma may be issued under a branch (C7520); hence the rotation (nothing is
//     pending at the back edge: S^T(j + 1) is waited for at the end of block j) and the last block
//     is a second instance of the loop body (a generic lambda with a compile-time LAST: no S^T(j + 1))
//     instead of an if. (A dummy S^T on the last block also compiled clean, at 1 / (5 count) more
//     tensor work.)
// Variant 2 ("pipe+group"): variant 1's kernel with another causal launch order. Shipped causal grids
//   are key-block-major over all B H heads (longest walks first), so the ~132 resident CTAs belong to
//   ~132 different heads: at (8,16,2048,128) every CTA streams its own head's Q / dO (1 MB) and adds
//   into its own head's dq_accum (1 MB), ~260 MB in flight against the 50 MB L2. Here the grid is cut
//   into groups of heads whose Q, dO and dq_accum (8 T D bytes a head) fill about half the L2
//   (T = 2048, D = 128: 12 heads), key-block-major inside a group: longest walks still first within
//   each group, the resident CTAs share a few heads' rows in L2. Non-causal grids are already
//   head-major (variant 2 = variant 1 there).
// SASS (cuobjdump -sass, D = 64 and 128, causal and not): per block S^T(next) / dP^T / dV / dK / dQ^T
// HGMMAs with waits only at DEPBAR.LE 1 after dV, dQ^T and S^T(next) and LE 0 at the block's end;
// ptxas -v: no spills, no C75xx warnings.
// Built from attention_bwd_variants_d64.cu / _d128.cu (bf16 only: the timed instantiations).
#define TK_HBWD_DEV_VARIANTS 1
#include "hopper_backward.cu"

#include <algorithm>
#include <type_traits>

namespace tk_attn {
namespace {

// hb_layout with EXTRA more Q / dO / lse2 / Delta stages (D = 64: 3 + 1 = 4, 162 KB; D = 128: 2 + 1 = 3,
// 226.5 KB of the 227 KB).
template <int D, int EXTRA>
struct hb_dev_layout {
  static constexpr int PANELS = D / HB_PANEL;
  static constexpr int STAGES = hb_layout<D>::STAGES + EXTRA;
  static constexpr int KV_PANEL = HB_N * 128;
  static constexpr int Q_PANEL = HB_M * 128;
  static constexpr int KV_BYTES = PANELS * KV_PANEL;
  static constexpr int Q_BYTES = PANELS * Q_PANEL;
  static constexpr int DS_BYTES = HB_N * 128;
  static constexpr int DQ_STAGE_BYTES = 64 * 64 * 4;
  static constexpr int VEC_BYTES = 2 * HB_M * 4;
  static constexpr int K_OFF = 0;
  static constexpr int V_OFF = K_OFF + KV_BYTES;
  static constexpr int Q_OFF = V_OFF + KV_BYTES;
  static constexpr int DO_OFF = Q_OFF + STAGES * Q_BYTES;
  static constexpr int DS_OFF = DO_OFF + STAGES * Q_BYTES;
  static constexpr int DQ_OFF = DS_OFF + 2 * DS_BYTES;
  static constexpr int VEC_OFF = DQ_OFF + 2 * DQ_STAGE_BYTES;
  static constexpr int SMEM_BYTES = VEC_OFF + STAGES * VEC_BYTES + 1024;
  static_assert(SMEM_BYTES <= 227 * 1024, "dev Hopper attention backward: shared memory over 227 KB");
};

template <typename T, int D, bool CAUSAL>
__global__ void __launch_bounds__(HB_THREADS, 1)
attention_bwd_dev_kernel(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap k_map,
                         const __grid_constant__ CUtensorMap v_map, const __grid_constant__ CUtensorMap do_map,
                         const __grid_constant__ CUtensorMap lse_map, const __grid_constant__ CUtensorMap delta_map,
                         const __grid_constant__ hb_args a, const int group) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using L = hb_dev_layout<D, 1>;
  constexpr int STAGES = L::STAGES;
  extern __shared__ char smem_raw[];
  char *base = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  __shared__ barrier kv_full, qd_full[STAGES], qd_empty[STAGES];
  auto q_tile = [&](int s) { return base + L::Q_OFF + s * L::Q_BYTES; };
  auto do_tile = [&](int s) { return base + L::DO_OFF + s * L::Q_BYTES; };
  auto vec = [&](int s) { return reinterpret_cast<float *>(base + L::VEC_OFF + s * L::VEC_BYTES); };
  char *k_tile = base + L::K_OFF, *v_tile = base + L::V_OFF;

  if (threadIdx.x == 0) {
    init(kv_full, 1);
    for (int s = 0; s < STAGES; s++) {
      init(qd_full[s], 1);
      init(qd_empty[s], 2);
    }
    fence_barrier_init();
  }
  __syncthreads();

  const int T_ = a.seq;
  const int n_kb = (T_ + HB_N - 1) / HB_N;
  const int n_bh = a.heads * a.batch;
  // Causal with group > 0: the grid is cut into groups of `group` heads (the last one may have fewer),
  // key-block-major inside a group (longest walks first, as shipped) and group after group, so the
  // CTAs resident at one time share the Q / dO blocks and the dq_accum rows of a few heads in L2
  // instead of touching ~one head each (shipped: key-block-major over all B H heads).
  int kb, bh;
  if (CAUSAL && group > 0) {
    const int per = group * n_kb;
    const int g0 = int(blockIdx.x) / per;
    const int within = int(blockIdx.x) - g0 * per;
    const int gl = min(group, n_bh - g0 * group);
    kb = within / gl;
    bh = g0 * group + within % gl;
  } else {
    kb = CAUSAL ? int(blockIdx.x) / n_bh : int(blockIdx.x) % n_kb;
    bh = CAUSAL ? int(blockIdx.x) % n_bh : int(blockIdx.x) / n_kb;
  }
  const int b = bh / a.heads, h = bh % a.heads;
  const int n0 = kb * HB_N;
  const int n_mb = (T_ + HB_M - 1) / HB_M;
  const int mb_first = CAUSAL ? n0 / HB_M : 0;
  const int count = n_mb - mb_first;
  const int rot = CAUSAL ? 0 : int(int64_t(kb) * count / n_kb);
  auto block_of = [&](int j) {
    const int r = rot + j;
    return mb_first + (r >= count ? r - count : r);
  };

  if (wg::warpgroupid() == 0) {
    // ---- producer (as shipped) ----
    wg::set_max_registers<HB_PRODUCER_REGS>();
    if (wg::warpgroup_thread() == 0) {
      expect_bytes(kv_full, 2 * L::KV_BYTES);
      for (int p = 0; p < L::PANELS; p++) {
        tma::load_async(k_tile + p * L::KV_PANEL, k_map, kv_full, p * HB_PANEL, n0, h, b);
        tma::load_async(v_tile + p * L::KV_PANEL, v_map, kv_full, p * HB_PANEL, n0, h, b);
      }
      for (int j = 0; j < count; j++) {
        const int s = j % STAGES, m0 = block_of(j) * HB_M;
        wait(qd_empty[s], ((j / STAGES) & 1) ^ 1);
        expect_bytes(qd_full[s], 2 * L::Q_BYTES + L::VEC_BYTES);
        for (int p = 0; p < L::PANELS; p++) {
          tma::load_async(q_tile(s) + p * L::Q_PANEL, q_map, qd_full[s], p * HB_PANEL, m0, h, b);
          tma::load_async(do_tile(s) + p * L::Q_PANEL, do_map, qd_full[s], p * HB_PANEL, m0, h, b);
        }
        tma::load_async(vec(s), lse_map, qd_full[s], m0, bh);
        tma::load_async(vec(s) + HB_M, delta_map, qd_full[s], m0, bh);
      }
    }
    return;
  }

  // ---- consumers ----
  wg::set_max_registers<HB_CONSUMER_REGS>();
  const int c = wg::warpgroupid() - 1;
  const int me = wg::warpgroup_thread();
  const int key0 = n0 + 64 * c;
  const float sc = a.scale_log2;
  using acc64 = wg::accumulator<64>;
  using acc_d = wg::accumulator<D>;
  acc_d dv, dk;
#pragma unroll
  for (int i = 0; i < acc_d::REGS; i++) dv.v[i] = dk.v[i] = 0.f;
  float *dq_head = a.dq_accum + int64_t(bh) * a.padded_rows * D;
  float *dq_stage = reinterpret_cast<float *>(base + L::DQ_OFF + c * L::DQ_STAGE_BYTES);
  constexpr int DQ_SLICES = D == 128 ? HB_N / 16 : 64 / 16;
  const int dq_panel = D == 128 ? c : 0;
  const int dq_k0 = D == 128 ? 0 : 4 * c;
  const int dq_block_col = D == 128 ? 2 * c : 0;

  // dQ^T (rows = head dims, columns = queries m0q..) -> xor32 staging -> two 8 KB bulk reductions
  auto reduce_dq = [&](const acc64 &dqt, int m0q) {
    if (me == 0) bulk_wait_group_read<0>();  // the previous block's reductions have read the staging
    wg::sync(1 + c);
#pragma unroll
    for (int i = 0; i < acc64::REGS; i++) {
      const int d = acc64::row(i), q = acc64::col(i);
      dq_stage[((q >> 5) * 2 + (d >> 5)) * 1024 + xor32_offset(q & 31, d & 31)] = dqt.v[i];
    }
    fence_proxy_async_shared();
    wg::sync(1 + c);
    if (me == 0) {
#pragma unroll
      for (int ii = 0; ii < 2; ii++)
        bulk_reduce_add(dq_head + int64_t((m0q / 32 + ii) * (D / 32) + dq_block_col) * 1024, dq_stage + ii * 2048,
                        8192);
      bulk_commit_group();
    }
  };

  // S^T = K_c Q^T of slot s into st (fenced, committed; the caller waits)
  auto issue_st = [&](acc64 &st, int s) {
    wg::mma_fence(st.v);
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      const uint64_t dk_ = wg::desc_k128(k_tile + (kk / 4) * L::KV_PANEL + c * 64 * 128);
      const uint64_t dq_ = wg::desc_k128(q_tile(s) + (kk / 4) * L::Q_PANEL);
      wg::wgmma_ss<T, 64>(st.v, wg::desc_advance_k(dk_, kk % 4), wg::desc_advance_k(dq_, kk % 4), kk > 0);
    }
    wg::mma_commit();
  };

  wait(kv_full, 0);
  // Rotated loop: S^T of block j is issued at the end of block j - 1 (the prologue for j = 0), so the
  // dQ^T staging of block j - 1 runs while S^T(j) is on the tensor cores. No wgmma is pending at the
  // loop's back edge (one pending there made ptxas serialize every wgmma, C7514), and no wgmma is
  // issued under a runtime branch (C7520): the last block is the body's LAST = true instance.
  acc64 st;
  wait(qd_full[0], 0);
  issue_st(st, 0);
  wg::mma_wait<0>(st.v);
  auto block = [&](const int j, auto last_tag) __attribute__((always_inline)) {
    constexpr bool LAST = decltype(last_tag)::value;
    const int s = j % STAGES;
    const int m0 = block_of(j) * HB_M;

    // dP^T = V_c dO^T (st holds S^T(j), complete)
    acc64 dpt;
    wg::mma_fence(dpt.v);
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
      const uint64_t dv_ = wg::desc_k128(v_tile + (kk / 4) * L::KV_PANEL + c * 64 * 128);
      const uint64_t do_ = wg::desc_k128(do_tile(s) + (kk / 4) * L::Q_PANEL);
      wg::wgmma_ss<T, 64>(dpt.v, wg::desc_advance_k(dv_, kk % 4), wg::desc_advance_k(do_, kk % 4), kk > 0);
    }
    wg::mma_commit();

    // P^T in place, then dV += P^T dO (as shipped)
    const float *lse2 = vec(s), *delta = vec(s) + HB_M;
    const bool masked = CAUSAL ? key0 + 63 > m0 : key0 + 64 > T_;
#pragma unroll
    for (int g = 0; g < 8; g++) {
      const int col0 = acc64::col(4 * g);
      const float2 l2 = *reinterpret_cast<const float2 *>(lse2 + col0);
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int i = 4 * g + e;
        float x = st.v[i];
        if (masked) {
          const int key = key0 + acc64::row(i), query = m0 + col0 + (e & 1);
          if (CAUSAL ? key > query : key >= T_) x = neg_infty();
        }
        st.v[i] = fast_exp2(fmaf(x, sc, -((e & 1) ? l2.y : l2.x)));
      }
    }
    wg::a_fragment<T> pf[4], dsf[4];
#pragma unroll
    for (int kk = 0; kk < 4; kk++) wg::to_a_fragment(pf[kk], st.v, kk);
    wg::mma_fence(dv.v);
    const uint64_t ddo = wg::desc_mn128(do_tile(s), L::Q_PANEL), dqm = wg::desc_mn128(q_tile(s), L::Q_PANEL);
#pragma unroll
    for (int kk = 0; kk < 4; kk++) wg::wgmma_rs<T, D, true>(dv.v, pf[kk].r, wg::desc_advance_k_mn(ddo, kk), 1);
    wg::mma_commit();
    wg::mma_wait<1>(dpt.v);  // dP^T done (dV may still run)

    // dS^T, its fragments and shared copy, dK += dS^T Q (as shipped)
#pragma unroll
    for (int g = 0; g < 8; g++) {
      const float2 dl = *reinterpret_cast<const float2 *>(delta + acc64::col(4 * g));
#pragma unroll
      for (int e = 0; e < 4; e++) {
        const int i = 4 * g + e;
        dpt.v[i] = st.v[i] * (dpt.v[i] - ((e & 1) ? dl.y : dl.x));
      }
    }
#pragma unroll
    for (int kk = 0; kk < 4; kk++) wg::to_a_fragment(dsf[kk], dpt.v, kk);
    char *ds_buf = base + L::DS_OFF + (j & 1) * L::DS_BYTES;
#pragma unroll
    for (int i = 0; i < acc64::REGS; i += 2)
      *reinterpret_cast<uint32_t *>(ds_buf + 64 * c * 128 + wg::swizzle128_offset(acc64::row(i), acc64::col(i))) =
          dsf[i / 8].r[(i % 8) / 2];
    fence_proxy_async_shared();
    wg::mma_fence(dk.v);
#pragma unroll
    for (int kk = 0; kk < 4; kk++) wg::wgmma_rs<T, D, true>(dk.v, dsf[kk].r, wg::desc_advance_k_mn(dqm, kk), 1);
    wg::mma_commit();

    // dQ^T partial = K^T dS^T (as shipped)
    if constexpr (D == 128) wg::named_sync(HB_DS_BAR, 2 * wg::WARPGROUP_THREADS);
    else wg::sync(1 + c);
    acc64 dqt;
    wg::mma_fence(dqt.v);
    const uint64_t dka = wg::desc_mn128(k_tile + dq_panel * L::KV_PANEL, L::KV_PANEL);
    const uint64_t dsb = wg::desc_mn128(ds_buf, L::DS_BYTES);
#pragma unroll
    for (int kk = 0; kk < DQ_SLICES; kk++)
      wg::wgmma_ss<T, 64, true, true>(dqt.v, wg::desc_advance_k_mn(dka, dq_k0 + kk),
                                      wg::desc_advance_k_mn(dsb, dq_k0 + kk), kk > 0);
    wg::mma_commit();
    wg::mma_wait<1>(dk.v);  // dV, dK retired (dQ^T may still run): pf, dsf and slot s are free
    wg::pin_registers(dv.v);
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
      wg::pin_registers(pf[kk].r);
      wg::pin_registers(dsf[kk].r);
    }
    if (me == 0) arrive(qd_empty[s]);

    // S^T of the next block (none after the last block: that copy of the body is a separate instance)
    if constexpr (!LAST) {
      const int sn = s + 1 == STAGES ? 0 : s + 1;
      wait(qd_full[sn], ((j + 1) / STAGES) & 1);
      issue_st(st, sn);
      wg::mma_wait<1>(dqt.v);  // dQ^T(j) done (S^T(j + 1) runs on)
    } else {
      wg::mma_wait<0>(dqt.v);
    }
    reduce_dq(dqt, m0);
    if constexpr (!LAST) wg::mma_wait<0>(st.v);
  };
#pragma unroll 1
  for (int j = 0; j < count - 1; j++) block(j, std::false_type{});
  block(count - 1, std::true_type{});
  if (me == 0) bulk_wait_group<0>();

  T *dv_g = static_cast<T *>(a.dv) + int64_t(b) * a.dv_s.b + int64_t(h) * a.dv_s.h;
  T *dk_g = static_cast<T *>(a.dk) + int64_t(b) * a.dk_s.b + int64_t(h) * a.dk_s.h;
#pragma unroll
  for (int i = 0; i < acc_d::REGS; i += 2) {
    const int key = key0 + acc_d::row(i), col = acc_d::col(i);
    if (key < T_) {
      *reinterpret_cast<uint32_t *>(dv_g + int64_t(key) * a.dv_s.t + col) = wg::pack2<T>(dv.v[i], dv.v[i + 1]);
      *reinterpret_cast<uint32_t *>(dk_g + int64_t(key) * a.dk_s.t + col) =
          wg::pack2<T>(dk.v[i] * a.scale, dk.v[i + 1] * a.scale);
    }
  }
#else
  __trap();
#endif
}

// The shipped launcher's steps (prep, maps, main kernel, dq convert) with the dev kernel.
// variant 1: shipped launch order; variant 2: causal grids in head groups whose Q, dO (16-bit) and
// dq_accum (fp32) rows, 8 T D bytes a head, fill about half the L2.
template <typename T, int D, bool CAUSAL>
cudaError_t launch_dev_bwd(const BwdParams &p, int variant, cudaStream_t stream) {
  const int Tp = int(dq_accum_rows(p.T));
  const int64_t rows = int64_t(p.B) * p.H * Tp;
  {
    constexpr int rows_per_cta = HB_PREP_THREADS / (D / 8);
    hbwd_prep_kernel<T, D><<<unsigned(cdiv64(rows, rows_per_cta)), HB_PREP_THREADS, 0, stream>>>(
        static_cast<const T *>(p.o), p.o_s, static_cast<const T *>(p.dout), p.do_s, p.lse, p.lse_log2, p.delta, p.H,
        p.T, Tp, rows);
    cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  CUtensorMap qm, km, vm, dom, lm, dm;
  try {
    qm = hb_bhtd_map<T>(p.q, p.q_s, p.B, p.H, p.T, D, HB_M);
    km = hb_bhtd_map<T>(p.k, p.k_s, p.B, p.H, p.T, D, HB_N);
    vm = hb_bhtd_map<T>(p.v, p.v_s, p.B, p.H, p.T, D, HB_N);
    dom = hb_bhtd_map<T>(p.dout, p.do_s, p.B, p.H, p.T, D, HB_M);
    lm = host::matrix_map<float>(p.lse_log2, uint64_t(p.B) * p.H, Tp, Tp, 1, HB_M, 0);
    dm = host::matrix_map<float>(p.delta, uint64_t(p.B) * p.H, Tp, Tp, 1, HB_M, 0);
  } catch (const std::exception &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return cudaErrorInvalidValue;
  }
  hb_args a{p.T, p.H, p.B, Tp, p.scale, p.scale * LOG2E, p.dq_accum, p.dk, p.dv, p.dk_s, p.dv_s};
  int group = 0;
  if (variant == 2) {
    int dev = 0, l2 = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev) != cudaSuccess)
      return cudaErrorInvalidValue;
    const int64_t per_head = 8 * int64_t(p.T) * D;
    group = int(std::max<int64_t>(1, std::min<int64_t>(int64_t(p.B) * p.H, int64_t(l2 / 2) / per_head)));
  }
  constexpr int smem = hb_dev_layout<D, 1>::SMEM_BYTES;
  auto kernel = attention_bwd_dev_kernel<T, D, CAUSAL>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const int64_t n_blocks = int64_t((p.T + HB_N - 1) / HB_N) * p.H * p.B;
  if (n_blocks > 0x7fffffff) return cudaErrorInvalidValue;
  kernel<<<unsigned(n_blocks), HB_THREADS, smem, stream>>>(qm, km, vm, dom, lm, dm, a, group);
  if ((err = cudaGetLastError()) != cudaSuccess) return err;

  bwd_args<T> ac{};
  ac.dq = make_gl<T>(p, p.dq, p.dq_s);
  ac.dq_accum = gl<float>{p.dq_accum, {p.B, p.H, Tp, p.D}, {int64_t(Tp) * p.D * p.H, int64_t(Tp) * p.D, p.D}};
  ac.dq_rows = Tp;
  ac.dq_xor32 = true;
  ac.seq = p.T;
  ac.heads = p.H;
  ac.scale = p.scale;
  return launch_dq_convert<T>(ac, D, stream);
}

// bf16 only: the timed instantiations.
template <int D>
cudaError_t dev_bwd(const BwdParams &p, int variant, cudaStream_t s) {
  if (p.dtype != DType::bf16 || p.D != D || (variant != 1 && variant != 2)) return cudaErrorInvalidValue;
  return p.causal ? launch_dev_bwd<bf16, D, true>(p, variant, s) : launch_dev_bwd<bf16, D, false>(p, variant, s);
}

}  // namespace
}  // namespace tk_attn
