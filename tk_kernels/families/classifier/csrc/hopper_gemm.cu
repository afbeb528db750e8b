// The classifier's two Hopper GEMMs (sm_90a), which take the softmax into the GEMMs so that no kernel
// makes a separate pass over the logits (launcher interface: classifier.h; the chunk loop: ops.py):
//
//   logits_kernel   L = x W^T (bf16/fp16, fp32 accumulate), and per (row, 256-column tile) the max m and the
//                   sum s of exp(l - m) over the tile's ROUNDED logits (what F.cross_entropy sees after the
//                   upcast). rows.cu turns a row's tiles into its log-sum-exp and loss.
//   dlogits_kernel  dx32 += softmax(L) W, the softmax exp(L - lse) computed from L in shared memory between the
//                   TMA load of an A tile and the wgmmas that read it (a transform stage of the pipeline), K split
//                   over CTAs (fp32 atomics into dx32). The CTA whose column tile is kt % tiles_n also writes
//                   the softmax's K slice kt to the gradient buffer, so every element is written once; rows.cu's
//                   finish_rows then subtracts the onehot (dx = dx32 - W[target], G[target] -= 1), and the weight
//                   gradient dW += G^T x reads G there (cuBLAS, ops.py).
//
// Why: unfused, a chunk of logits was written by the logits GEMM, read and rewritten as G by a softmax kernel
// (1.10 ms of 6.9 at N = 16384, C = 768, V = 50304: 3.0 TB/s) and read by the two gradient GEMMs. Here the
// softmax pass is gone: its statistics ride on the logits GEMM's epilogue, its exponentials on the dx GEMM's
// mainloop (3 per logit at C = 768: each of the C / 256 column tiles transforms its own copy of the A tile;
// fp32 exp2 on the MUFU, hidden under the other consumer warpgroup's wgmmas), and G's one write on dx's CTAs.
//
// Both kernels are tk::pipeline descriptions (include/pipeline/producer_consumer.cuh) with the MLP family's
// GEMM structure: a persistent grid, one producer warpgroup issuing TMA loads of a 4-stage ring of K slices
// (per slice a 128 x 64 A tile and a 256 x 64 B tile, 128-byte swizzled), two consumer warpgroups of 64 rows x
// 256 columns (m64n256k16). The logits epilogue is deferred: a finished tile is rounded into 64 registers and
// stored (staged 64 x 64 boxes, TMA) in 8 pieces while the next tile's first K slices run, and each piece also
// folds its 16 values per thread into the running (max, sum of exp) of the thread's two rows (online softmax
// update, exp2 of fp32); the last piece combines the 4 lanes of a row (shuffles) and writes the row's pair.
#include <algorithm>
#include <cmath>
#include <string>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "host/tensor_map.cuh"
#include "pipeline/producer_consumer.cuh"
#include "thread/bulk.cuh"
#include "thread/mbarrier.cuh"
#include "thread/tma.cuh"
#include "warpgroup/mma.cuh"
#include "warpgroup/sync.cuh"

#include "classifier.h"

namespace tk_cls {
namespace {

constexpr int BM = 128, BN = 256, BK = 64;
constexpr int BOX = 64;                        // MN-major B boxes and output store boxes: 64 x 64
constexpr int BOX_BYTES = BOX * BOX * 2;       // 8 KB
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2;
constexpr int THREADS = 384;
constexpr float LOG2E = 1.4426950408889634f;

struct Shape {
  int M, N, K;                 // logits: rows, V, C;  dlogits: rows, C, V
  int tiles_n, tiles, k_tiles, splits;
  bool m_fastest;              // tile order: row tiles fastest (logits) or column tiles fastest (dlogits)
};
struct Unit {
  int m0, n0, tile_n, k_begin, k_end;
};
// unit u: tile u % tiles, K split u / tiles (split-major: CTAs running together read the same K rows). Tile order:
// the logits GEMM's row tiles fastest, so that the CTAs running together share W's rows (a chunk's x, 1.5 MB, stays
// in L2; W, 77 MB at V = 50304, is read from DRAM once per chunk: with column tiles fastest it was read once per
// 128-row tile, 3.5 TB/s, and the GEMM ran at 0.62x cuBLAS); the dx GEMM's column tiles fastest (they share A).
__device__ __forceinline__ Unit unit(const Shape &s, int u) {
  const int tile = u % s.tiles, split = u / s.tiles, tiles_m = s.tiles / s.tiles_n;
  const int tm = s.m_fastest ? tile % tiles_m : tile / s.tiles_n, tn = s.m_fastest ? tile / tiles_m : tile % s.tiles_n;
  return {tm * BM, tn * BN, tn, split * s.k_tiles / s.splits, (split + 1) * s.k_tiles / s.splits};
}
struct UnitWalk {
  const Shape &s;
  int u;
  template <typename G>
  __device__ UnitWalk(const G &g) : s(g.s), u(blockIdx.x) {}
  __device__ bool next(Unit &w) {
    if (u >= s.tiles * s.splits) return false;
    w = unit(s, u);
    u += gridDim.x;
    return true;
  }
};

struct alignas(1024) Stage {
  char a[A_BYTES];  // 128 x 64 of A, K-major (one box)
  char b[B_BYTES];  // 256 x 64 of B: K-major (one box) or 4 MN-major [64 K rows x 64] boxes
};
using Slot = tk::pipeline::slot<Stage>;

template <bool B_MN>
__device__ __forceinline__ void load_slice(const Slot &s, const CUtensorMap &a_map, const CUtensorMap &b_map, int m0,
                                           int n0, int kt) {
  tk::tma::load_async(s.tiles.a, a_map, s.full(), kt * BK, m0);
  if constexpr (!B_MN) tk::tma::load_async(s.tiles.b, b_map, s.full(), kt * BK, n0);
  else
    for (int j = 0; j < BN / BOX; j++) tk::tma::load_async(s.tiles.b + j * BOX_BYTES, b_map, s.full(), n0 + j * BOX, kt * BK);
}

template <typename T> struct pair16;
template <> struct pair16<__nv_bfloat16> {
  __device__ static float2 unpack(uint32_t u) { return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u)); }
};
template <> struct pair16<__half> {
  __device__ static float2 unpack(uint32_t u) {
    __half2 h;
    memcpy(&h, &u, 4);
    return __half22float2(h);
  }
};

// ------------------------------------------------------------------------------------------------
// logits_kernel: L = x W^T with the row statistics of every 256-column tile

struct LogitsGlobals {
  const CUtensorMap &a_map, &b_map, &c_map;
  const Shape &s;
  float2 *stats;  // (M, tiles_n): (max, sum of exp(l - max)) of the tile's valid columns
};

constexpr int PIECES = 2 * BN / BOX;            // a pending tile's epilogue: 8 half-boxes
constexpr int PIECE_WORDS = BN / 4 / PIECES;    // 8 words (16 values) per thread per piece

// word k (0..7) of `piece`: accumulator register pair i (rows r, r + 8 alternate with k % 2)
__device__ __forceinline__ int piece_pair(int piece, int k) {
  const int cb = piece / 2, j = (piece % 2) * 4 + k / 2;
  return 4 * (cb * BOX / 8 + j) + 2 * (k % 2);
}

// the running (max, sum of exp(x - max)) of a row, merged with another: exp2 of fp32, and an all -inf
// pair (no valid column yet) stays (-inf, 0) without NaNs
__device__ __forceinline__ void merge_stats(float &m, float &s, float mo, float so) {
  const float mn = fmaxf(m, mo), base = mn == -INFINITY ? 0.f : mn;
  s = s * exp2f((m - base) * LOG2E) + so * exp2f((mo - base) * LOG2E);
  m = mn;
}

template <typename T>
struct LogitsConsumer {
  static constexpr int DEFERRED_PIECES = PIECES;
  static constexpr bool UNROLL_PIECES = true;
  const LogitsGlobals &g;
  const int id;
  char *staging;                 // two 64 x 64 store boxes of this consumer
  tk::wg::accumulator<BN> acc;
  uint32_t word[BN / 4];         // the pending tile, rounded: word i / 2 holds acc.v[i], acc.v[i + 1]
  Unit pu{};                     // its unit
  float rm[2], rs[2];            // its running statistics, rows r and r + 8 of this thread
  int stores = 0;

  __device__ LogitsConsumer(const LogitsGlobals &g, const tk::pipeline::consumer_ctx<> &ctx)
      : g(g), id(ctx.id), staging(ctx.scratch + ctx.id * 2 * BOX_BYTES) {}

  __device__ void compute(const Slot &s, int i) {
    tk::wg::mma_fence(acc.v);
    const uint64_t da = tk::wg::desc_k128(s.tiles.a + id * 64 * BK * 2), db = tk::wg::desc_k128(s.tiles.b);
#pragma unroll
    for (int k = 0; k < BK / 16; k++)
      tk::wg::wgmma_ss<T, BN>(acc.v, tk::wg::desc_advance_k(da, k), tk::wg::desc_advance_k(db, k), i > 0 || k > 0);
    tk::wg::mma_commit();
  }
  __device__ void retire() { tk::wg::mma_wait<1>(acc.v); }
  __device__ void drain() { tk::wg::mma_wait<0>(acc.v); }

  __device__ void finish(const Unit &w) {
#pragma unroll
    for (int i = 0; i < acc.REGS; i += 2) word[i / 2] = tk::wg::pack2<T>(acc.v[i], acc.v[i + 1]);
    pu = w;
    rm[0] = rm[1] = -INFINITY;
    rs[0] = rs[1] = 0.f;
  }

  // piece p: its 16 values into the rows' statistics, then into the staging box (and the TMA store)
  __device__ void deferred(const int piece) {
    const Shape &s = g.s;
    float pm[2] = {-INFINITY, -INFINITY}, x[PIECE_WORDS][2];
#pragma unroll
    for (int k = 0; k < PIECE_WORDS; k++) {
      const int i = piece_pair(piece, k), col = pu.n0 + tk::wg::accumulator<BN>::col(i);
      const float2 v = pair16<T>::unpack(word[i / 2]);
      x[k][0] = col < s.N ? v.x : -INFINITY;  // columns past V (TMA read W's missing rows as zeros)
      x[k][1] = col + 1 < s.N ? v.y : -INFINITY;
      pm[k % 2] = fmaxf(pm[k % 2], fmaxf(x[k][0], x[k][1]));
    }
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const float mn = fmaxf(rm[h], pm[h]), base = mn == -INFINITY ? 0.f : mn, bl = base * LOG2E;
      float sum = rs[h] * exp2f((rm[h] - base) * LOG2E);
#pragma unroll
      for (int k = h; k < PIECE_WORDS; k += 2) sum += exp2f(fmaf(x[k][0], LOG2E, -bl)) + exp2f(fmaf(x[k][1], LOG2E, -bl));
      rm[h] = mn;
      rs[h] = sum;
    }
    store_piece(piece);
    if (piece == PIECES - 1) write_stats();
  }

  // the 4 lanes of a row hold 64 of its 256 columns each: combine them, lane t = 0 writes
  __device__ void write_stats() {
#pragma unroll
    for (int h = 0; h < 2; h++) {
#pragma unroll
      for (int o = 1; o < 4; o <<= 1) {
        const float mo = __shfl_xor_sync(0xffffffffu, rm[h], o), so = __shfl_xor_sync(0xffffffffu, rs[h], o);
        merge_stats(rm[h], rs[h], mo, so);
      }
    }
    const int row = pu.m0 + id * 64 + tk::wg::accumulator<BN>::row(0);
    if ((threadIdx.x & 3) == 0) {
      if (row < g.s.M) g.stats[int64_t(row) * g.s.tiles_n + pu.tile_n] = make_float2(rm[0], rs[0]);
      if (row + 8 < g.s.M) g.stats[int64_t(row + 8) * g.s.tiles_n + pu.tile_n] = make_float2(rm[1], rs[1]);
    }
  }

  // piece 2b writes the first half of box b into a staging buffer, piece 2b + 1 the second half, then TMA
  // stores the box (rows >= M and columns >= N dropped); two buffers, so a store overlaps the next box
  __device__ void store_piece(const int piece) {
    const int me = tk::wg::warpgroup_thread(), cb = piece / 2;
    char *out = staging + (stores & 1) * BOX_BYTES;
    if (piece % 2 == 0) {  // the store that last read this buffer is done with it
      if (me == 0) tk::bulk_wait_group_read<1>();
      tk::wg::sync(1 + id);
    }
#pragma unroll
    for (int k = 0; k < PIECE_WORDS; k++) {
      const int i = piece_pair(piece, k);
      const int r = tk::wg::accumulator<BN>::row(i), c = tk::wg::accumulator<BN>::col(i) - cb * BOX;
      *reinterpret_cast<uint32_t *>(out + tk::wg::swizzle128_offset(r, c)) = word[i / 2];
    }
    if (piece % 2 == 1) {
      tk::fence_proxy_async_shared();
      tk::wg::sync(1 + id);
      if (me == 0) {
        tk::tma::store_async(g.c_map, out, pu.n0 + cb * BOX, pu.m0 + id * 64);
        tk::bulk_commit_group();
      }
      stores++;
    }
  }

  __device__ void last() {
    if (tk::wg::warpgroup_thread() == 0) tk::bulk_wait_group<0>();
  }
};

template <typename T>
struct LogitsPipe {
  using globals = LogitsGlobals;
  using stage = Stage;
  using work = Unit;
  using scheduler = UnitWalk;
  using consumer = LogitsConsumer<T>;
  static constexpr int STAGES = 4, CONSUMERS = 2, PRODUCER_REGS = 40, CONSUMER_REGS = 232;
  static constexpr int SCRATCH_BYTES = 2 * 2 * BOX_BYTES;
  __device__ static int iterations(const LogitsGlobals &, const Unit &w) { return w.k_end - w.k_begin; }
  __device__ static void load(const Slot &s, const LogitsGlobals &g, const Unit &w, int i) {
    load_slice<false>(s, g.a_map, g.b_map, w.m0, w.n0, w.k_begin + i);
  }
};

template <typename T>
__global__ void __launch_bounds__(THREADS, 1)
logits_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
              const __grid_constant__ CUtensorMap c_map, const Shape s, float2 *stats) {
  tk::pipeline::kernel<LogitsPipe<T>>::run(LogitsGlobals{a_map, b_map, c_map, s, stats});
}

// ------------------------------------------------------------------------------------------------
// dlogits_kernel: dx32 += G W, G = exp2(L log2 e - lse2) - onehot, transformed in shared memory
//
// The transform is a pipeline stage of its own (P::transform, include/pipeline): once a slot's A tile of logits
// has landed, warps 1..3 of the producer warpgroup (warp 0 issues the TMA loads) rewrite it in place as G, 16-byte
// chunks of 8 elements, fp32 exp2 on the MUFU, rounded to T, and the column tile that owns the slice (kt % tiles_n)
// also stores those chunks to the gradient buffer (8 threads write a row's 128 bytes: coalesced). The consumers
// then run plain wgmma_ss on the slot, as in a GEMM without the softmax. Measured before (s12c): the consumers
// transformed their own A fragments between slices, 113 SASS instructions per slice's 32 elements per thread
// plus two warpgroup barriers and the shared G tile, and the tensor pipe was busy 44% of the time (0.52x the
// cuBLAS dx GEMM); wgmma_rs on the transformed fragments computed wrong dx (ptxas gave the next slice's
// transform the in-flight wgmma's A registers).

struct DxGlobals {
  const CUtensorMap &a_map, &b_map;
  const Shape &s;
  const float *lse2;   // (M,) log-sum-exp * log2 e; +inf for ignored rows (G = 0)
  float *dx32;         // (M, N) fp32, zeroed before the launch
  void *g;             // (M, ldg): softmax, each element written once (the onehot: finish_rows)
  int64_t ldg;
};

// The transform of one landed slot (slice kt) by thread t of the 96 transform threads: 16-byte chunks c = t + 96 j
// of the 128 x 64 tile, i.e. row t / 8 + 12 j, physical chunk t % 8 (96 is a multiple of 8), which holds columns
// 8 ((t % 8) ^ (row % 8)) .. + 7 (the 128-byte swizzle). Three chunks in flight per thread (their loads, exp2s and
// stores overlap: one at a time, a chunk's LDS -> MUFU -> STS chain was the whole slice's critical path). No
// onehot here: G' = softmax, and rows.cu's finish_rows subtracts the onehot's share afterwards (dx -= W[target],
// G[target] = softmax - 1 recomputed from the logit), so the loop has no per-element compare.
template <typename T>
__device__ __forceinline__ void transform_slot(char *tile, const DxGlobals &g, const Unit &w, int kt, int t) {
  const bool write = kt % g.s.tiles_n == w.tile_n;
  const float *lse2 = g.lse2;
  T *gout = static_cast<T *>(g.g);
  const int64_t ldg = g.ldg;
  const int M = g.s.M, pc = t & 7, r0 = t >> 3;
#pragma unroll 3
  for (int j = 0; j < 11; j++) {
    const int r = r0 + 12 * j;
    if (r >= BM) break;
    const int row = w.m0 + r, col0 = kt * BK + 8 * (pc ^ (r & 7));
    const bool in = row < M;
    const float bl = in ? __ldg(lse2 + row) : INFINITY;
    uint4 *p = reinterpret_cast<uint4 *>(tile + r * 128 + pc * 16);
    const uint4 v = *p;
    uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const float2 f = pair16<T>::unpack(u[e]);
      u[e] = tk::wg::pack2<T>(exp2f(fmaf(f.x, LOG2E, -bl)), exp2f(fmaf(f.y, LOG2E, -bl)));
    }
    const uint4 o = make_uint4(u[0], u[1], u[2], u[3]);
    *p = o;
    if (write && in && col0 < ldg) *reinterpret_cast<uint4 *>(gout + int64_t(row) * ldg + col0) = o;
  }
}

template <typename T>
struct DxConsumer {
  const DxGlobals &g;
  const int id;
  tk::wg::accumulator<BN> acc;

  __device__ DxConsumer(const DxGlobals &g, const tk::pipeline::consumer_ctx<> &ctx) : g(g), id(ctx.id) {}

  __device__ void compute(const Slot &s, int i) {
    tk::wg::mma_fence(acc.v);
    const uint64_t da = tk::wg::desc_k128(s.tiles.a + id * 64 * BK * 2), db = tk::wg::desc_mn128(s.tiles.b, BOX_BYTES);
#pragma unroll
    for (int k = 0; k < BK / 16; k++)
      tk::wg::wgmma_ss<T, BN, true>(acc.v, tk::wg::desc_advance_k(da, k), tk::wg::desc_advance_k_mn(db, k), i > 0 || k > 0);
    tk::wg::mma_commit();
  }
  __device__ void retire() { tk::wg::mma_wait<1>(acc.v); }
  __device__ void drain() { tk::wg::mma_wait<0>(acc.v); }

  // fp32 partial sums of this K split, added atomically (8-byte reductions)
  __device__ void finish(const Unit &u) {
#pragma unroll
    for (int i = 0; i < acc.REGS; i += 2) {
      const int row = u.m0 + id * 64 + acc.row(i), col = u.n0 + acc.col(i);
      if (row < g.s.M && col < g.s.N) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        atomicAdd(reinterpret_cast<float2 *>(g.dx32 + int64_t(row) * g.s.N + col), make_float2(acc.v[i], acc.v[i + 1]));
#else
        __trap();  // (never runs: the kernel needs sm_90a)
#endif
      }
    }
  }
};

template <typename T>
struct DxPipe {
  using globals = DxGlobals;
  using stage = Stage;
  using work = Unit;
  using scheduler = UnitWalk;
  using consumer = DxConsumer<T>;
  // the transform warps' three chunks in flight take ~60 registers: 72 + 2 x 216 = 504, the CTA's 3 x 168
  static constexpr int STAGES = 4, CONSUMERS = 2, PRODUCER_REGS = 72, CONSUMER_REGS = 216;
  __device__ static int iterations(const DxGlobals &, const Unit &w) { return w.k_end - w.k_begin; }
  __device__ static void load(const Slot &s, const DxGlobals &g, const Unit &w, int i) {
    load_slice<true>(s, g.a_map, g.b_map, w.m0, w.n0, w.k_begin + i);
  }
  __device__ static void transform(const Slot &s, const DxGlobals &g, const Unit &w, int i, int t, int nt) {
    transform_slot<T>(s.tiles.a, g, w, w.k_begin + i, t);  // nt = 96
  }
};

template <typename T>
__global__ void __launch_bounds__(THREADS, 1)
dlogits_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map, const Shape s,
               const float *lse2, float *dx32, void *gout, int64_t ldg) {
  tk::pipeline::kernel<DxPipe<T>>::run(DxGlobals{a_map, b_map, s, lse2, dx32, gout, ldg});
}

// ------------------------------------------------------------------------------------------------
// host side

int sm_count() {
  static int sms = [] {
    int device = 0, n = 0;
    cudaGetDevice(&device);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device);
    return n > 0 ? n : 132;
  }();
  return sms;
}

Shape make_shape(int M, int N, int K, int splits, bool m_fastest) {
  Shape s{M, N, K, (N + BN - 1) / BN, 0, (K + BK - 1) / BK, splits, m_fastest};
  s.tiles = ((M + BM - 1) / BM) * s.tiles_n;
  return s;
}

template <typename Kernel>
cudaError_t prepare(Kernel kernel, int smem) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
}

template <typename T>
cudaError_t launch_logits(const HopperXentParams &p, cudaStream_t stream) {
  const Shape s = make_shape(p.rows, p.V, p.C, 1, true);
  const CUtensorMap a_map = tk::host::matrix_map<T>(p.x, p.rows, p.C, p.C, BM, BK, 128);
  const CUtensorMap b_map = tk::host::matrix_map<T>(p.w, p.V, p.C, p.C, BN, BK, 128);
  const CUtensorMap c_map = tk::host::matrix_map<T>(p.logits, p.rows, p.V, p.ldl, 64, BOX, 128);
  constexpr int smem = tk::pipeline::kernel<LogitsPipe<T>>::SHARED_BYTES;
  cudaError_t err = prepare(logits_kernel<T>, smem);
  if (err != cudaSuccess) return err;
  logits_kernel<T><<<std::min(sm_count(), s.tiles), THREADS, smem, stream>>>(a_map, b_map, c_map, s, p.stats);
  return cudaGetLastError();
}

// K splits of the dx GEMM: the best wave fill (units / (waves x SMs)) with >= 8 K slices per unit, the fewest
// splits among equals (s12c: 5 splits of 24 tiles, 120 units on 132 SMs, left 9% of the SMs idle; 11 fill 2 waves)
int dx_splits(int tiles, int k_tiles, int sms) {
  int best = 1;
  double best_fill = 0.0;
  for (int splits = 1; splits <= 64 && splits * 8 <= k_tiles; splits++) {
    const int units = tiles * splits, waves = (units + sms - 1) / sms;
    const double fill = double(units) / (double(waves) * sms);
    if (fill > best_fill + 1e-9) best = splits, best_fill = fill;
  }
  return best;
}

template <typename T>
cudaError_t launch_dx(const HopperXentParams &p, cudaStream_t stream) {
  Shape s = make_shape(p.rows, p.C, p.V, 1, false);
  s.splits = dx_splits(s.tiles, s.k_tiles, sm_count());
  const CUtensorMap a_map = tk::host::matrix_map<T>(p.logits, p.rows, p.V, p.ldl, BM, BK, 128);
  const CUtensorMap b_map = tk::host::matrix_map<T>(p.w, p.V, p.C, p.C, BK, BOX, 128);
  constexpr int smem = tk::pipeline::kernel<DxPipe<T>>::SHARED_BYTES;
  cudaError_t err = prepare(dlogits_kernel<T>, smem);
  if (err != cudaSuccess) return err;
  dlogits_kernel<T><<<std::min(sm_count(), s.tiles * s.splits), THREADS, smem, stream>>>(
      a_map, b_map, s, p.lse2, p.dx32, p.grad, p.ldl);
  return cudaGetLastError();
}

const char *check(const HopperXentParams &p) {
  if (p.rows < 0 || p.V < 1 || p.C < 8) return "tk classifier (Hopper): need rows >= 0, V >= 1, C >= 8";
  if (p.C % 8) return "tk classifier (Hopper): C must be a multiple of 8";
  if (p.ldl < p.V || p.ldl % 8) return "tk classifier (Hopper): the logits row stride must be >= V and a multiple of 8";
  return nullptr;
}

template <typename F>
cudaError_t guarded(const HopperXentParams &p, const char **why, F f) {
  if (const char *bad = check(p)) {
    if (why) *why = bad;
    return cudaErrorInvalidValue;
  }
  if (p.rows == 0) return cudaSuccess;
  try {
    return f();
  } catch (const std::exception &ex) {  // a tensor map the driver rejects (alignment, strides)
    static thread_local std::string reason;
    reason = std::string("tk classifier (Hopper): ") + ex.what();
    if (why) *why = reason.c_str();
    return cudaErrorInvalidValue;
  }
}

}  // namespace

int logits_tiles(int V) { return (V + BN - 1) / BN; }

cudaError_t hopper_logits(const HopperXentParams &p, cudaStream_t stream, const char **why) {
  return guarded(p, why, [&] {
    return p.dtype == DType::bf16 ? launch_logits<__nv_bfloat16>(p, stream) : launch_logits<__half>(p, stream);
  });
}

cudaError_t hopper_dlogits(const HopperXentParams &p, cudaStream_t stream, const char **why) {
  return guarded(p, why, [&] {
    return p.dtype == DType::bf16 ? launch_dx<__nv_bfloat16>(p, stream) : launch_dx<__half>(p, stream);
  });
}

}  // namespace tk_cls
