// dev/: a prototype of the fused classifier of dev/README's "Leads after session 25" (not shipped). The question it
// answers on a GPU: does a chunk of the classifier run faster when the softmax pass over the logits disappears into
// the GEMMs around it? Checked and timed by dev/hopper/check_classifier_fused.py beside the family's chunk loop.
//
// Per chunk of R tokens (x_c (R, C), targets t, weight W (V, C), bf16 or fp16), five launches:
//   1. logits          L = x_c W^T (persistent TMA + wgmma GEMM, 128 x 128 tiles), whose epilogue, per row and
//                      128-column tile j, rounds the logits to T as the reference does, takes the tile's row max m_j,
//                      stores E = exp(l - m_j) in T (0 at the target's column, and in the pad columns up to the
//                      row stride), and writes (m_j, sum_j = sum exp(l - m_j)) and the target's logit l_t.
//   2. rows_kernel     per row: lse from the (m_j, sum_j), loss = lse - l_t, s_j = exp(m_j - lse) (<= 1, 0 for an
//                      ignored row) and c = exp(l_t - lse) - 1 = the target's gradient, in fp32.
//      So G = softmax - onehot = s_j E (off the target) and c (at it): the two gradient GEMMs only multiply.
//   3. dx              ws += (s E) W: A = E K-major through registers (ldmatrix), each fragment register times the
//                      bf16x2 / half2 pair (s_j(row), s_j(row)), wgmma with A from registers; B = W MN-major. K = V
//                      is split so that the 48 tiles of (2048, 768) fill the GPU: fp32 atomic adds into ws.
//   4. dx_finish_kernel dx = T(ws + c W[t]) (the target's term in fp32).
//   5. dW              dW (+)= alpha (G^T x_c): A = E^T, i.e. E read MN-major (ldmatrix.trans), each register times
//                      the pair (s_j(k), s_j(k + 1)) of its two tokens (the 128-row M tile is one 128-column block
//                      j); where a token's target falls in the fragment (a warp-uniform test per K slice, rare)
//                      its element is set to c; B = x_c MN-major; the bf16 / fp16 dW read and written from registers
//                      (beta = 1 from the second chunk, as the family's addmm does; the producer prefetches the
//                      tile's old dW into L2 as it starts the tile, so the epilogue's reads do not wait for DRAM).
// The GEMMs share one persistent kernel (gemm_kernel: a producer warpgroup with one TMA thread, a ring of 128 x 64 A
// and BN x 64 B slices (BN = 256: 4 stages, dx and dW; BN = 128: 6 stages, the logits), two consumer warpgroups of
// 64 rows each; the RS mainloops alternate two fragment
// sets by slice parity and pin the retired one, as dev/hopper/gemm_ascale.cu does), with the epilogue and the A
// transform as a struct. The logits' epilogue is deferred (C > 192, 4 slices): a finished tile's row maxima are taken at once,
// its exponentials, sums and stores run in 4 pieces between the next tile's first 4 slices (the MLP GEMM's plain-store
// scheme), and its tiles go m-fastest (see tile_of). Why 128 x 128: with 128 x 256 tiles the pending tile (64 words)
// beside the accumulator (128) spilled 440-970 bytes a thread (ptxas -v), deferred or not, since the accumulator stays
// live for the next tile's wgmmas. Simplifications against the family's GEMM (to be measured
// first): no cluster pairs, the other epilogues not deferred (dx: ~157 slices a unit; dW: 32), stores from registers.
//
// Requirements: C % 8 == 0 (16-byte rows), V <= 65536 * 256, any R and V. E's row stride is V rounded up to 8.
#include <algorithm>
#include <limits>

#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "common/base_types.cuh"
#include "host/splits.cuh"
#include "host/tensor_map.cuh"
#include "thread/mbarrier.cuh"
#include "thread/tma.cuh"
#include "warpgroup/mma.cuh"
#include "warpgroup/sync.cuh"

namespace {

using bf16 = __nv_bfloat16;
using half = __half;

constexpr int BM = 128, BK = 64;
constexpr int BOX = 64, BOX_BYTES = BOX * BOX * 2;   // MN-major boxes: [64 K rows x 64 M / N columns]
constexpr int A_BYTES = BM * BK * 2;
constexpr int BLOCK = 128;  // the softmax statistics' column block: the logits GEMM's tile width (see LogitsEpi)
// the ring of a GEMM with BN-wide tiles: 4 stages of 48 KB (BN = 256) or 6 of 32 KB (BN = 128)
template <int BN>
struct ring {
  static constexpr int STAGES = BN == 256 ? 4 : 6, STAGE_BYTES = A_BYTES + BN * BK * 2;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;  // + alignment slack
};
constexpr float LOG2E = 1.4426950408889634f;

enum class Major { K, MN };

struct Shape {
  int M, N, K, bn, tiles_m, tiles_n, tiles, k_tiles, splits;
  bool m_fastest;  // tile order: consecutive units share B's tile (the logits: W is 77 MB, x_c 3 MB) or A's
};
struct Tile {
  int m0, n0, k_begin, k_end;  // K range in slices of BK
};

Shape make_shape(int M, int N, int K, int bn, int splits, bool m_fastest = false) {
  Shape s{M, N, K, bn, (M + BM - 1) / BM, (N + bn - 1) / bn, 0, (K + BK - 1) / BK, 1, m_fastest};
  s.tiles = s.tiles_m * s.tiles_n;
  s.splits = std::max(1, std::min(splits, s.k_tiles));
  return s;
}

// Unit u: split-major, then tiles n-fastest (neighbouring CTAs read the same A rows) or m-fastest (the same B rows).
// The logits GEMM goes m-fastest: n-fastest, the 132 CTAs of a wave would sweep W's 197 tiles (77 MB, more than the
// L2) once per 128-row block of the chunk, 16 times a chunk from DRAM; m-fastest they share ~8 W tiles at a time.
__device__ __forceinline__ Tile tile_of(const Shape &s, int u) {
  const int t = u % s.tiles, split = u / s.tiles;
  const int tm = s.m_fastest ? t % s.tiles_m : t / s.tiles_n, tn = s.m_fastest ? t / s.tiles_m : t % s.tiles_n;
  return {tm * BM, tn * s.bn, split * s.k_tiles / s.splits, (split + 1) * s.k_tiles / s.splits};
}

// ------------------------------------------------------------------------------------------------
// 16-bit pairs

template <typename T> __device__ __forceinline__ float2 unpack2(uint32_t w) { return tk::convert_pair<float2>(tk::from_u32<T>(w)); }
// the product of two pairs, rounded to T (one HMUL2)
template <typename T> __device__ __forceinline__ uint32_t mul2(uint32_t a, uint32_t b) {
  return tk::as_u32<T>(__hmul2(tk::from_u32<T>(a), tk::from_u32<T>(b)));
}

// a target as a column index: -1 (no column) outside [0, V), so that no int64 target wraps onto a column
__device__ __forceinline__ int column_of(int64_t t, int V) { return t >= 0 && t < V ? int(t) : -1; }

// the pair w with its half `hi` (0: low, 1: high) replaced by v rounded to T
template <typename T>
__device__ __forceinline__ uint32_t with_half(uint32_t w, int hi, float v) {
  const float2 cur = unpack2<T>(w);
  return hi ? tk::wg::pack2<T>(cur.x, v) : tk::wg::pack2<T>(v, cur.y);
}

// ------------------------------------------------------------------------------------------------
// A fragments through registers (the layout of tk::wg::a_fragment: r[0] rows 0-7 x k 0-7 of the warp's 16 rows,
// r[1] rows 8-15 x k 0-7, r[2] rows 0-7 x k 8-15, r[3] rows 8-15 x k 8-15; lane l holds row l / 4 (+ 8) and
// k 2 (l % 4), + 1 of each), loaded by tk::wg::load_a_fragment (K-major tile) / load_a_fragment_mn (MN-major box)

template <typename T> using frags = tk::wg::a_fragment<T>[BK / 16];

// ------------------------------------------------------------------------------------------------
// the persistent GEMM: C[M x N] = sum_k A(m, k) B(n, k); Epi says what happens to A on its way (A_REGS) and to
// each finished 64 x BN accumulator

template <typename T, Major AM, Major BMJ, bool A_REGS, typename Epi>
__global__ void __launch_bounds__(384, 1)
gemm_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map, const Shape s,
            const __grid_constant__ Epi epi) {
  static_assert(A_REGS || AM == Major::K, "an MN-major A goes through registers");
  constexpr int BN = Epi::BN, STAGES = ring<BN>::STAGES, STAGE_BYTES = ring<BN>::STAGE_BYTES;
  extern __shared__ char smem_raw[];
  char *base = smem_raw + ((1024 - (tk::smem_u32(smem_raw) & 1023)) & 1023);
  __shared__ tk::barrier full[STAGES], empty[STAGES];
  if (threadIdx.x == 0) {
    for (int i = 0; i < STAGES; i++) {
      tk::init(full[i], 1);
      tk::init(empty[i], 2);
    }
    tk::fence_barrier_init();
  }
  __syncthreads();
  const int units = s.tiles * s.splits, wg = tk::wg::warpgroupid();

  if (wg == 0) {  // the producer: one thread loads every slice of the CTA's units into the ring
    tk::wg::set_max_registers<40>();
    if (tk::wg::warpgroup_thread() == 0) {
      int g = 0;
      for (int u = blockIdx.x; u < units; u += gridDim.x) {
        const Tile w = tile_of(s, u);
        epi.producer_start(w);
        for (int kt = w.k_begin; kt < w.k_end; kt++, g++) {
          const int st = g % STAGES;
          tk::wait(empty[st], ((g / STAGES) & 1) ^ 1);
          tk::expect_bytes(full[st], STAGE_BYTES);
          char *a = base + st * STAGE_BYTES, *b = a + A_BYTES;
          if constexpr (AM == Major::K) tk::tma::load_async(a, a_map, full[st], kt * BK, w.m0);
          else
            for (int j = 0; j < BM / BOX; j++) tk::tma::load_async(a + j * BOX_BYTES, a_map, full[st], w.m0 + j * BOX, kt * BK);
          if constexpr (BMJ == Major::K) tk::tma::load_async(b, b_map, full[st], kt * BK, w.n0);
          else
            for (int j = 0; j < BN / BOX; j++) tk::tma::load_async(b + j * BOX_BYTES, b_map, full[st], w.n0 + j * BOX, kt * BK);
        }
      }
    }
    return;
  }

  tk::wg::set_max_registers<232>();
  const int consumer = wg - 1, me = tk::wg::warpgroup_thread();
  tk::wg::accumulator<BN> acc;
  frags<T> f0, f1;  // A_REGS: the fragment sets of even and odd slices
  int g = 0;
  // slice kt of tile w on ring slot g: issued with fragment set f; then the slice before it is retired (wait<1>)
  // and its slot freed; `prev`, which that slice's wgmmas read, is pinned until here
  auto slice = [&](const Tile &w, int kt, frags<T> &f, frags<T> &prev) {
    const int st = g % STAGES;
    tk::wait(full[st], (g / STAGES) & 1);
    const char *a = base + st * STAGE_BYTES + consumer * (64 * BK * 2), *b = base + st * STAGE_BYTES + A_BYTES;
    const bool first = kt == w.k_begin;
    const uint64_t db = BMJ == Major::K ? tk::wg::desc_k128(b) : tk::wg::desc_mn128(b, BOX_BYTES);
    auto db_k = [&](int k) { return BMJ == Major::K ? tk::wg::desc_advance_k(db, k) : tk::wg::desc_advance_k_mn(db, k); };
    if constexpr (!A_REGS) {
      const uint64_t da = tk::wg::desc_k128(a);
      tk::wg::mma_fence(acc.v);
#pragma unroll
      for (int k = 0; k < BK / 16; k++)
        tk::wg::wgmma_ss<T, BN, BMJ == Major::MN>(acc.v, tk::wg::desc_advance_k(da, k), db_k(k), !first || k > 0);
    } else {
#pragma unroll
      for (int k = 0; k < BK / 16; k++) {  // the consumer's 64 rows: 64 K-major rows, or its [64 k x 64 m] box
        if constexpr (AM == Major::K) tk::wg::load_a_fragment(f[k], a, k);
        else tk::wg::load_a_fragment_mn(f[k], a, k);
      }
      epi.transform(f, w, kt, consumer);
      tk::wg::mma_fence(acc.v);  // after the fragments' last writes: the fence orders them before the wgmmas
#pragma unroll
      for (int k = 0; k < BK / 16; k++) tk::wg::wgmma_rs<T, BN, BMJ == Major::MN>(acc.v, f[k].r, db_k(k), !first || k > 0);
    }
    tk::wg::mma_commit();
    tk::wg::mma_wait<1>(acc.v);
    if constexpr (A_REGS) {
#pragma unroll
      for (int k = 0; k < BK / 16; k++) tk::wg::pin_registers(prev[k].r);
    }
    if (!first && me == 0) tk::arrive(empty[(g - 1) % STAGES]);
    g++;
  };

  typename Epi::pending pend;  // a deferred epilogue's finished tile (Epi::PIECES > 0)
  bool has_pending = false;
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const Tile w = tile_of(s, u);
    int kt = w.k_begin;
    if constexpr (Epi::PIECES > 0) {
      // the previous tile's epilogue in PIECES pieces, each right after one of this tile's first slices was issued, so
      // that it runs while that slice's wgmmas do (the launcher defers only with >= PIECES slices a unit)
      static_assert(Epi::PIECES % 2 == 0, "pieces come in pairs (the fragment sets alternate)");
      if (has_pending) {
#pragma unroll
        for (int p = 0; p < Epi::PIECES; p += 2) {
          slice(w, kt + p, f0, f1);
          epi.piece(pend, p);
          slice(w, kt + p + 1, f1, f0);
          epi.piece(pend, p + 1);
        }
        kt += Epi::PIECES;
      }
    }
    for (; kt + 1 < w.k_end; kt += 2) {
      slice(w, kt, f0, f1);
      slice(w, kt + 1, f1, f0);
    }
    if (kt < w.k_end) slice(w, kt, f0, f1);
    tk::wg::mma_wait<0>(acc.v);
    if constexpr (A_REGS) {
#pragma unroll
      for (int k = 0; k < BK / 16; k++) {
        tk::wg::pin_registers(f0[k].r);
        tk::wg::pin_registers(f1[k].r);
      }
    }
    if (me == 0) tk::arrive(empty[(g - 1) % STAGES]);
    epi.finish(acc, w, consumer, pend);
    has_pending = true;
  }
  if constexpr (Epi::PIECES > 0) {
    if (has_pending) {
#pragma unroll
      for (int p = 0; p < Epi::PIECES; p++) epi.piece(pend, p);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// 1. the logits' epilogue: E, the (max, sum) statistics, the target's logit

// The finished tile is rounded to T (the logits' precision in the reference), its row maxima taken and the rounded
// values packed two a word (exact: they are T already) into a pending tile of 32 words; PIECES pieces of 8 words (32
// columns of both rows) then compute exp(l - m), the row sums and the target's logit, and store E. DEFERRED: the
// pieces run between the next tile's first 4 slices (as the MLP GEMM's plain store does); else right away.
template <typename T, bool DEFERRED>
struct LogitsEpi {
  static constexpr int BN = BLOCK;  // 128 x 128 tiles: the pending tile (32 words) fits beside the accumulator (64)
  static constexpr int N_PIECES = 4, PIECE_WORDS = BN / 4 / N_PIECES;
  static constexpr int PIECES = DEFERRED ? N_PIECES : 0;  // what the kernel interleaves
  struct pending {
    uint32_t word[BN / 4];  // accumulator pair i / 2: (v[i], v[i + 1]) rounded to T, -inf past V
    float mx[2], sum[2];    // rows r0, r0 + 8: the tile's row max, the running sum of exp(l - max)
    int t[2];               // their targets (-1: none)
    int r0, n0;
  };
  using acc_t = tk::wg::accumulator<BN>;
  __device__ __forceinline__ void producer_start(const Tile &) const {}

  T *E;                    // (M, lde): exp(l - m_j) in T, 0 at the target and in the pad columns V .. lde - 1
  int64_t lde;
  float2 *stats;           // (tiles_n, lds): (m_j, sum_j) per 128-column block j and row
  int64_t lds;
  float *target_logit;     // (M,): l_t, NaN where no tile holds the target (pre-filled)
  const int64_t *targets;  // (M,)
  int M, V;

  __device__ __forceinline__ void finish(acc_t &acc, const Tile &w, int consumer, pending &pd) const {
    pd.r0 = w.m0 + consumer * 64 + acc.row(0);
    pd.n0 = w.n0;
    pd.t[0] = pd.r0 < M ? column_of(targets[pd.r0], V) : -1;  // an ignore_index or out-of-range target: no column
    pd.t[1] = pd.r0 + 8 < M ? column_of(targets[pd.r0 + 8], V) : -1;
    float mx0 = tk::neg_infty(), mx1 = tk::neg_infty();
#pragma unroll
    for (int i = 0; i < acc.REGS; i += 2) {
      const int col = w.n0 + acc.col(i);
      const float l0 = col < V ? tk::to_float(tk::from_float<T>(acc.v[i])) : tk::neg_infty();
      const float l1 = col + 1 < V ? tk::to_float(tk::from_float<T>(acc.v[i + 1])) : tk::neg_infty();
      if (i & 2) mx1 = fmaxf(mx1, fmaxf(l0, l1));
      else mx0 = fmaxf(mx0, fmaxf(l0, l1));
      pd.word[i / 2] = tk::wg::pack2<T>(l0, l1);
    }
#pragma unroll
    for (int o = 1; o <= 2; o <<= 1) {  // the 4 threads of a quad hold a row's 128 columns
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o));
    }
    pd.mx[0] = mx0, pd.mx[1] = mx1;
    pd.sum[0] = pd.sum[1] = 0.f;
    if constexpr (!DEFERRED) {
#pragma unroll
      for (int p = 0; p < N_PIECES; p++) piece(pd, p);
    }
  }

  // words 8p .. 8p + 7: columns 32p .. 32p + 31 of the thread's two rows; the last piece writes the statistics
  __device__ __forceinline__ void piece(pending &pd, const int p) const {
    const int c0 = pd.n0 + acc_t::col(0);  // this thread's first column; word wi's is c0 + 8 (wi / 2)
    T *rows[2] = {E + int64_t(pd.r0) * lde + c0, E + int64_t(pd.r0 + 8) * lde + c0};
    const bool in[2] = {pd.r0 < M, pd.r0 + 8 < M};
#pragma unroll
    for (int k = 0; k < PIECE_WORDS; k++) {
      const int wi = PIECE_WORDS * p + k, h = wi & 1, dc = 8 * (wi / 2), col = c0 + dc;
      const float2 l = unpack2<T>(pd.word[wi]);
      const float mb = pd.mx[h] * LOG2E;
      float e0 = tk::fast_exp2(fmaf(l.x, LOG2E, -mb)), e1 = tk::fast_exp2(fmaf(l.y, LOG2E, -mb));
      pd.sum[h] += e0 + e1;
      if (col == pd.t[h]) target_logit[pd.r0 + 8 * h] = l.x, e0 = 0.f;
      if (col + 1 == pd.t[h]) target_logit[pd.r0 + 8 * h] = l.y, e1 = 0.f;
      if (in[h] && col < lde) *reinterpret_cast<uint32_t *>(rows[h] + dc) = tk::wg::pack2<T>(e0, e1);
    }
    if (p == N_PIECES - 1) {
      float sum0 = pd.sum[0], sum1 = pd.sum[1];
#pragma unroll
      for (int o = 1; o <= 2; o <<= 1) {
        sum0 += __shfl_xor_sync(0xffffffffu, sum0, o);
        sum1 += __shfl_xor_sync(0xffffffffu, sum1, o);
      }
      if ((threadIdx.x & 3) == 0) {
        float2 *st = stats + int64_t(pd.n0 / BN) * lds;
        if (pd.r0 < M) st[pd.r0] = make_float2(pd.mx[0], sum0);
        if (pd.r0 + 8 < M) st[pd.r0 + 8] = make_float2(pd.mx[1], sum1);
      }
    }
  }
};

// ------------------------------------------------------------------------------------------------
// 2. per row: lse, loss, the block scales s_j and the target's gradient c

constexpr int ROW_GROUPS = 8;  // thread (x, y) of a 32 x 8 block: row 32 blockIdx.x + x, blocks j = y, y + 8, ...

__global__ void __launch_bounds__(32 * ROW_GROUPS)
rows_kernel(const float2 *__restrict__ stats, int tiles_n, int64_t lds, const float *__restrict__ target_logit,
            const int64_t *__restrict__ targets, int64_t ignore_index, int M, int V, float *__restrict__ row_loss,
            float *__restrict__ s, float *__restrict__ c) {
  __shared__ float2 part[ROW_GROUPS][33];
  __shared__ float lse_of[32];
  const int r = blockIdx.x * 32 + threadIdx.x;
  const bool valid = r < M;
  float m = tk::neg_infty(), sum = 0.f;  // online (max, sum exp) over this thread's blocks
  if (valid) {
    for (int j = threadIdx.y; j < tiles_n; j += ROW_GROUPS) {
      const float2 st = stats[int64_t(j) * lds + r];
      const float mn = fmaxf(m, st.x);
      sum = sum * expf(m - mn) + st.y * expf(st.x - mn);
      m = mn;
    }
  }
  part[threadIdx.y][threadIdx.x] = make_float2(m, sum);
  __syncthreads();
  if (threadIdx.y == 0 && valid) {
    float mm = part[0][threadIdx.x].x;
    for (int y = 1; y < ROW_GROUPS; y++) mm = fmaxf(mm, part[y][threadIdx.x].x);
    float ss = 0.f;
    for (int y = 0; y < ROW_GROUPS; y++) {
      const float2 p = part[y][threadIdx.x];
      if (p.y > 0.f) ss += p.y * expf(p.x - mm);
    }
    const float lse = mm + logf(ss);
    const int64_t t = targets[r];
    const bool ignored = t == ignore_index, in_range = t >= 0 && t < V;
    const float lt = target_logit[r];
    row_loss[r] = ignored ? 0.f : in_range ? lse - lt : __int_as_float(0x7fc00000);
    c[r] = ignored || !in_range ? 0.f : expf(lt - lse) - 1.f;
    lse_of[threadIdx.x] = ignored ? tk::pos_infty() : lse;  // s = 0 for an ignored row
  }
  __syncthreads();
  if (valid) {
    const float lse = lse_of[threadIdx.x];
    for (int j = threadIdx.y; j < tiles_n; j += ROW_GROUPS) s[int64_t(j) * lds + r] = expf(stats[int64_t(j) * lds + r].x - lse);
  }
}

// ------------------------------------------------------------------------------------------------
// 3. dx's GEMM: A = E scaled per row and 128-column block by s; fp32 atomics into ws

template <typename T>
struct DxEpi {
  static constexpr int BN = 256, PIECES = 0;
  struct pending {};
  __device__ __forceinline__ void producer_start(const Tile &) const {}
  const float *s;  // (tiles of V, lds)
  int64_t lds;
  float *ws;       // (M, N) fp32, zeroed
  int M, N;

  __device__ __forceinline__ void transform(frags<T> &f, const Tile &w, int kt, int consumer) const {
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    const int r = w.m0 + consumer * 64 + 16 * warp + lane / 4;
    const float *sj = s + int64_t(kt * BK / BLOCK) * lds;
    const float s0 = r < M ? sj[r] : 0.f, s1 = r + 8 < M ? sj[r + 8] : 0.f;
    const uint32_t lo = tk::wg::pack2<T>(s0, s0), hi = tk::wg::pack2<T>(s1, s1);
#pragma unroll
    for (int k = 0; k < BK / 16; k++) {
      f[k].r[0] = mul2<T>(f[k].r[0], lo);
      f[k].r[1] = mul2<T>(f[k].r[1], hi);
      f[k].r[2] = mul2<T>(f[k].r[2], lo);
      f[k].r[3] = mul2<T>(f[k].r[3], hi);
    }
  }

  __device__ __forceinline__ void finish(tk::wg::accumulator<BN> &acc, const Tile &w, int consumer, pending &) const {
#pragma unroll
    for (int i = 0; i < acc.REGS; i += 2) {
      const int row = w.m0 + consumer * 64 + acc.row(i), col = w.n0 + acc.col(i);
      if (row < M && col < N) atomicAdd(reinterpret_cast<float2 *>(ws + int64_t(row) * N + col), make_float2(acc.v[i], acc.v[i + 1]));
    }
  }
};

// 4. dx = T(ws + c W[t]), two columns a thread
template <typename T>
__global__ void dx_finish_kernel(const float *__restrict__ ws, const float *__restrict__ c,
                                 const int64_t *__restrict__ targets, const T *__restrict__ W, int M, int N, int V,
                                 T *__restrict__ dx) {
  const int64_t pairs = int64_t(M) * N / 2;
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < pairs; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t row = 2 * p / N;
    const int col = int(2 * p - row * N);
    float2 v = *reinterpret_cast<const float2 *>(ws + 2 * p);
    const int64_t t = targets[row];
    const float cr = c[row];
    if (cr != 0.f && t >= 0 && t < V) {
      const float2 wt = unpack2<T>(*reinterpret_cast<const uint32_t *>(W + t * N + col));
      v.x += cr * wt.x;
      v.y += cr * wt.y;
    }
    *reinterpret_cast<uint32_t *>(dx + 2 * p) = tk::wg::pack2<T>(v.x, v.y);
  }
}

// ------------------------------------------------------------------------------------------------
// 5. dW's GEMM: A = G^T from E read MN-major, scaled per token; c at the targets; dW (+)= alpha acc

template <typename T>
struct DwEpi {
  static constexpr int BN = 256, PIECES = 0;
  struct pending {};
  CUtensorMap dw_map;      // dW in 128 x 256 boxes, unswizzled: the tile the epilogue reads back, prefetched to L2
  const float *s;          // (tiles of V, lds); past the chunk's rows finite (E's rows there read as 0)
  int64_t lds;
  const float *c;          // (K,)
  const int64_t *targets;  // (K,)
  T *dw;                   // (M, N) = (V, C)
  int M, N, K;
  float alpha;
  bool accumulate;

  // the producer, as it starts a tile: its slice of the old dW into L2 (DRAM latency off the epilogue's reads)
  __device__ __forceinline__ void producer_start(const Tile &w) const {
    if (accumulate) tk::tma::prefetch_l2(dw_map, w.n0, w.m0);
  }

  __device__ __forceinline__ void transform(frags<T> &f, const Tile &w, int kt, int consumer) const {
    const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, t2 = 2 * (lane & 3);
    const float *sk = s + int64_t(w.m0 / BLOCK) * lds + kt * BK;  // this slice's 64 tokens in the M tile's block
#pragma unroll
    for (int k = 0; k < BK / 16; k++) {
      const float2 a = *reinterpret_cast<const float2 *>(sk + 16 * k + t2);      // tokens 16k + t2, + 1
      const float2 b = *reinterpret_cast<const float2 *>(sk + 16 * k + 8 + t2);  // + 8
      const uint32_t lo = tk::wg::pack2<T>(a.x, a.y), hi = tk::wg::pack2<T>(b.x, b.y);
      f[k].r[0] = mul2<T>(f[k].r[0], lo);
      f[k].r[1] = mul2<T>(f[k].r[1], lo);
      f[k].r[2] = mul2<T>(f[k].r[2], hi);
      f[k].r[3] = mul2<T>(f[k].r[3], hi);
    }
    // the slice's tokens whose target lies in this warp's 16 vocabulary rows: their element is the target's gradient
    const int v0 = w.m0 + consumer * 64 + 16 * warp, k0 = kt * BK;
    const int ta = k0 + lane < K ? column_of(targets[k0 + lane], M) : -1;
    const int tb = k0 + 32 + lane < K ? column_of(targets[k0 + 32 + lane], M) : -1;
    if (!tk::warp_any(unsigned(ta - v0) < 16u || unsigned(tb - v0) < 16u)) return;
    const int g = lane >> 2;
#pragma unroll
    for (int k = 0; k < BK / 16; k++) {
#pragma unroll
      for (int d = 0; d < 4; d++) {  // this thread's tokens 16k + t2 + {0, 1, 8, 9}
        const int o = 16 * k + t2 + (d & 1) + 8 * (d >> 1);
        const int xa = __shfl_sync(0xffffffffu, ta, o & 31), xb = __shfl_sync(0xffffffffu, tb, o & 31);
        const int t = o < 32 ? xa : xb;
        // registers 2 (d >> 1) and 2 (d >> 1) + 1 hold this token for rows g and g + 8 (compile-time indices: a
        // run-time one would put the fragments in local memory)
        if (t - v0 == g) f[k].r[2 * (d >> 1)] = with_half<T>(f[k].r[2 * (d >> 1)], d & 1, c[k0 + o]);
        else if (t - v0 == g + 8) f[k].r[2 * (d >> 1) + 1] = with_half<T>(f[k].r[2 * (d >> 1) + 1], d & 1, c[k0 + o]);
      }
    }
  }

  __device__ __forceinline__ void finish(tk::wg::accumulator<BN> &acc, const Tile &w, int consumer, pending &) const {
#pragma unroll
    for (int i = 0; i < acc.REGS; i += 2) {
      const int row = w.m0 + consumer * 64 + acc.row(i), col = w.n0 + acc.col(i);
      if (row < M && col < N) {
        uint32_t *p = reinterpret_cast<uint32_t *>(dw + int64_t(row) * N + col);
        const float2 old = accumulate ? unpack2<T>(*p) : make_float2(0.f, 0.f);
        *p = tk::wg::pack2<T>(old.x + alpha * acc.v[i], old.y + alpha * acc.v[i + 1]);
      }
    }
  }
};

// ------------------------------------------------------------------------------------------------
// host side

int sm_count() {
  static int sms = [] {
    int device = 0, n = 0;
    C10_CUDA_CHECK(cudaGetDevice(&device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device));
    return n;
  }();
  return sms;
}

template <typename T, Major AM, Major BMJ, bool A_REGS, typename Epi>
void launch(const CUtensorMap &a_map, const CUtensorMap &b_map, const Shape &s, const Epi &epi, cudaStream_t stream) {
  auto kernel = gemm_kernel<T, AM, BMJ, A_REGS, Epi>;
  constexpr int smem = ring<Epi::BN>::SMEM_BYTES;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int grid = std::min(sm_count(), s.tiles * s.splits);
  if (grid > 0) kernel<<<grid, 384, smem, stream>>>(a_map, b_map, s, epi);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

constexpr int64_t IMMEDIATE = 1, N_FASTEST = 2;  // chunk()'s options

template <typename T>
void chunk_forward(const torch::Tensor &x, const torch::Tensor &w, const torch::Tensor &targets, int64_t ignore_index,
                   torch::Tensor &E, torch::Tensor &stats, torch::Tensor &target_logit, torch::Tensor &s,
                   torch::Tensor &c, torch::Tensor &ws, torch::Tensor &row_loss, torch::Tensor &dx, torch::Tensor &dw,
                   double alpha, bool accumulate, int64_t stage, int64_t options) {
  const int R = x.size(0), C = x.size(1), V = w.size(0);
  const int64_t lde = E.stride(0), lds = s.size(1);
  const int tiles_v = (V + BLOCK - 1) / BLOCK;
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream().stream();
  T *xp = reinterpret_cast<T *>(x.data_ptr()), *wp = reinterpret_cast<T *>(w.data_ptr()), *ep = reinterpret_cast<T *>(E.data_ptr());
  const int64_t *tp = targets.data_ptr<int64_t>();
  float2 *stp = reinterpret_cast<float2 *>(stats.data_ptr<float>());

  // 1. logits, E, statistics
  target_logit.fill_(std::numeric_limits<float>::quiet_NaN());
  {
    const auto a_map = tk::host::matrix_map<T>(xp, R, C, C, BM, BK, 128);
    const auto b_map = tk::host::matrix_map<T>(wp, V, C, C, BLOCK, BK, 128);
    const Shape sh = make_shape(R, V, C, BLOCK, 1, !(options & N_FASTEST));
    // the deferred epilogue needs units of >= PIECES (4) slices
    if (sh.k_tiles >= LogitsEpi<T, true>::PIECES && !(options & IMMEDIATE)) {
      const LogitsEpi<T, true> epi{ep, lde, stp, lds, target_logit.data_ptr<float>(), tp, R, V};
      launch<T, Major::K, Major::K, false>(a_map, b_map, sh, epi, stream);
    } else {
      const LogitsEpi<T, false> epi{ep, lde, stp, lds, target_logit.data_ptr<float>(), tp, R, V};
      launch<T, Major::K, Major::K, false>(a_map, b_map, sh, epi, stream);
    }
  }
  if (stage == 1) return;
  // 2. rows
  rows_kernel<<<(R + 31) / 32, dim3(32, ROW_GROUPS), 0, stream>>>(stp, tiles_v, lds, target_logit.data_ptr<float>(), tp,
                                                                  ignore_index, R, V, row_loss.data_ptr<float>(),
                                                                  s.data_ptr<float>(), c.data_ptr<float>());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (stage == 2) return;
  // 3, 4. dx
  {
    ws.zero_();
    const auto a_map = tk::host::matrix_map<T>(ep, R, V, lde, BM, BK, 128);
    const auto b_map = tk::host::matrix_map<T>(wp, V, C, C, BK, BOX, 128);
    Shape sh = make_shape(R, C, V, DxEpi<T>::BN, 1);
    sh = make_shape(R, C, V, DxEpi<T>::BN, tk::host::wave_filling_splits(sh.tiles, sh.k_tiles, sm_count()));
    const DxEpi<T> epi{s.data_ptr<float>(), lds, ws.data_ptr<float>(), R, C};
    launch<T, Major::K, Major::MN, true>(a_map, b_map, sh, epi, stream);
    const int64_t pairs = int64_t(R) * C / 2;
    const int blocks = int(std::min<int64_t>((pairs + 255) / 256, 8 * sm_count()));
    if (blocks > 0)
      dx_finish_kernel<T><<<blocks, 256, 0, stream>>>(ws.data_ptr<float>(), c.data_ptr<float>(), tp, wp, R, C, V,
                                                      reinterpret_cast<T *>(dx.data_ptr()));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  if (stage == 3) return;
  // 5. dW
  {
    const auto a_map = tk::host::matrix_map<T>(ep, R, V, lde, BK, BOX, 128);
    const auto b_map = tk::host::matrix_map<T>(xp, R, C, C, BK, BOX, 128);
    T *dwp = reinterpret_cast<T *>(dw.data_ptr());
    const DwEpi<T> epi{tk::host::matrix_map<T>(dwp, V, C, C, BM, DwEpi<T>::BN, 0), s.data_ptr<float>(), lds,
                       c.data_ptr<float>(), tp, dwp, V, C, R, float(alpha), accumulate};
    launch<T, Major::MN, Major::MN, true>(a_map, b_map, make_shape(V, C, R, DwEpi<T>::BN, 1), epi, stream);
  }
}

// One chunk of the fused classifier (see the top of this file). x (R, C), w (V, C) contiguous 16-bit of one dtype,
// targets (R,) int64; scratch: E (>= R, lde >= V, lde % 8 == 0) of x's dtype, stats (tiles, lds, 2) fp32, s (tiles,
// lds) fp32, finite (lds a multiple of 64, >= R: the dW GEMM reads whole 64-token slices), target_logit (R,), c
// (R,), ws (R, C) fp32; out: row_loss (R,), dx (R, C); dw (V, C) += alpha * G^T x (= when accumulate is false).
// stage < 5 stops after that launch (timing). options (experiments, bits): IMMEDIATE runs the logits epilogue right
// after its tile instead of deferring it; N_FASTEST walks the logits tiles n-fastest.
void chunk(const torch::Tensor &x, const torch::Tensor &w, const torch::Tensor &targets, int64_t ignore_index,
           torch::Tensor E, torch::Tensor stats, torch::Tensor target_logit, torch::Tensor s, torch::Tensor c,
           torch::Tensor ws, torch::Tensor row_loss, torch::Tensor dx, torch::Tensor dw, double alpha, bool accumulate,
           int64_t stage, int64_t options) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && w.is_contiguous() && x.scalar_type() == w.scalar_type() &&
              x.size(1) == w.size(1) && x.size(1) % 8 == 0, "x (R, C), w (V, C) contiguous, one 16-bit dtype, C % 8 == 0");
  const int64_t R = x.size(0), C = x.size(1), V = w.size(0), tiles = (V + BLOCK - 1) / BLOCK;
  TORCH_CHECK(E.stride(1) == 1 && E.stride(0) % 8 == 0 && E.stride(0) >= V && E.size(1) == E.stride(0) && E.size(0) >= R &&
              E.scalar_type() == x.scalar_type(), "E (>= R, lde) contiguous, lde % 8 == 0, lde >= V, x's dtype");
  const int64_t lds = s.size(1);
  TORCH_CHECK(lds % 64 == 0 && lds >= R && s.is_contiguous() && s.size(0) == tiles && stats.is_contiguous() &&
              stats.size(0) == tiles && stats.size(1) == lds && stats.size(2) == 2, "s (tiles, lds), stats (tiles, lds, 2): "
              "contiguous, lds a multiple of 64 and >= R");
  for (const torch::Tensor *t : {&target_logit, &c, &row_loss})
    TORCH_CHECK(t->is_contiguous() && t->numel() >= R && t->scalar_type() == at::kFloat, "target_logit, c, row_loss: fp32 (>= R,)");
  TORCH_CHECK(ws.is_contiguous() && ws.size(0) == R && ws.size(1) == C && dx.is_contiguous() && dx.size(0) == R &&
              dx.size(1) == C && dw.is_contiguous() && dw.size(0) == V && dw.size(1) == C &&
              dx.scalar_type() == x.scalar_type() && dw.scalar_type() == x.scalar_type(), "ws (R, C) fp32, dx (R, C), dw (V, C)");
  TORCH_CHECK(targets.scalar_type() == at::kLong && targets.is_contiguous() && targets.size(0) == R, "targets (R,) int64");
  if (R == 0) return;
  if (x.scalar_type() == at::kBFloat16)
    chunk_forward<bf16>(x, w, targets, ignore_index, E, stats, target_logit, s, c, ws, row_loss, dx, dw, alpha, accumulate, stage,
                        options);
  else if (x.scalar_type() == at::kHalf)
    chunk_forward<half>(x, w, targets, ignore_index, E, stats, target_logit, s, c, ws, row_loss, dx, dw, alpha, accumulate, stage,
                        options);
  else
    TORCH_CHECK(false, "bf16 or fp16");
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("chunk", &chunk, "one chunk of the fused classifier (dev/hopper/classifier_fused.cu)");
}
