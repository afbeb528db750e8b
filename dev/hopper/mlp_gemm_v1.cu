// dev copy of the MLP family's GEMM as shipped before the staged GELU / GELU' epilogues (commit 43a7dfe),
// built by dev/hopper/check_mlp_epilogue.py as its own extension (with the family's bindings.cpp) so
// that the old path is timed beside the shipped one in one process. Only the bf16 kernels of the
// forward layouts and the GELU' layout are instantiated (compile time); the rest returns an error.
// The MLP family's GEMM (sm_90a): C[M x N] = sum_k A(m, k) B(n, k), bf16/fp16 in, fp32 accumulate,
// with the epilogues of an MLP's forward (bias, bias + GELU) and backward (GELU', fp32 weight
// gradients). Launcher interface and operand layouts: mlp.h.
//
// Algorithm (grown from dev/hopper/gemm.cu, whose version 2 measured 0.99-1.03x cuBLAS at the GPT-2
// shapes on an H200): a persistent grid of min(#SMs, #work units) CTAs of three warpgroups.
//   - warpgroup 0, the producer (40 registers after setmaxnreg), has one thread issue the TMA loads of
//     a 4-stage ring of K slices: per slice a 128 x 64 A tile and a 256 x 64 B tile (48 KB), 128-byte
//     swizzled. K-major operands are one box each; MN-major operands are loaded as [64 K rows x 64]
//     boxes side by side (2 for A, 4 for B), the layout desc_mn128 describes. Out-of-bounds rows and
//     columns are zero-filled by TMA, so any M and ragged N / K tiles need no padding.
//   - warpgroups 1 and 2, the consumers (232 registers), each own 64 of the tile's 128 rows and run
//     m64n256k16 wgmma over the ring (the MN-major operands with the transpose flag), one group in
//     flight; a slot is released when the group that read it has completed.
//   - deferred epilogue (16-bit outputs): a finished tile is rounded to 16 bits (+ bias) into 64
//     registers beside the next tile's accumulator, and its epilogue ([GELU | * GELU'(pre)], 128B-
//     swizzled 8 KB staging buffer, TMA store that drops rows >= M and columns >= N) runs in 8 pieces,
//     each right after one K slice of the next tile was issued, while that slice's wgmmas run. fp32
//     outputs (weight gradients) are written from registers after their tile, atomically added when K
//     is split. Measured: the deferred plain store took x W^T from 0.95-1.08x to 1.01-1.10x cuBLAS.
//   - the producer runs ahead into the next work unit, so the loads of one tile overlap the end of the
//     one before.
// Work units: tiles of 128 x 256 (n fastest: neighbouring CTAs share A's rows); for weight gradients
// (M x N = C x 4C, only 72 tiles at C = 768 for 132 SMs) K is split so that the units fill whole waves
// (gemm_splits), split-major so that CTAs running together read the same K rows (they fit in L2).
// Shared memory: 4 x 48 KB ring + 2 consumers x 2 x 8 KB staging + 1 KB alignment = 225 KB.
// Measured (H200, bf16, bench/bench_mlp.py, bench/RESULTS.md): x W^T 0.96x cuBLAS at 8192^3 and 1.01-1.10x at
// the GPT-2 shapes; dy W 1.01-1.06x; dy^T x (split K, fp32 atomics) 0.84-0.93x. The GELU and GELU' epilogues
// are far from free (0.54x / 0.32x of cuBLAS + a separate PyTorch elementwise kernel at (16384, 3072, 768)):
// spreading them over the next tile's first slices is not enough to hide erf / exp and the pre-activation
// loads; the MLP as a whole is 0.53-0.65x torch.compile, so the model does not use it yet.
#include <algorithm>
#include <string>
#include <type_traits>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "host/splits.cuh"
#include "host/tensor_map.cuh"
#include "thread/bulk.cuh"
#include "thread/mbarrier.cuh"
#include "thread/tma.cuh"
#include "warpgroup/mma.cuh"
#include "warpgroup/sync.cuh"

#include "mlp_gelu_v1.cuh"  // the erff version the v1 kernels shipped with
#include "mlp.h"

namespace tk_mlp {
namespace {

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4;
constexpr int BOX = 64;                          // MN-major load boxes and store boxes: 64 x 64
constexpr int BOX_BYTES = BOX * BOX * 2;         // 8 KB
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2, STAGE_BYTES = A_BYTES + B_BYTES;
constexpr int RING_BYTES = STAGES * STAGE_BYTES;
constexpr int SMEM_BYTES = RING_BYTES + 2 * 2 * BOX_BYTES + 1024;
constexpr int THREADS = 384;

struct Shape {
  int M, N, K;
  int tiles_n, tiles, k_tiles, splits;
};

// Two 16-bit values in one 32-bit word: pack (round to T), unpack (to fp32), from / to a register word.
template <typename T> struct vec2;
template <> struct vec2<__nv_bfloat16> {
  using type = __nv_bfloat162;
  __device__ static type pack(float a, float b) { return __floats2bfloat162_rn(a, b); }
  __device__ static float2 unpack(type v) { return __bfloat1622float2(v); }
  // bf16 is the top half of an fp32: two integer ops, no conversion (measured: fewer registers)
  __device__ static float2 unpack_word(uint32_t u) { return make_float2(__uint_as_float(u << 16), __uint_as_float(u & 0xffff0000u)); }
};
template <> struct vec2<__half> {
  using type = __half2;
  __device__ static type pack(float a, float b) { return __floats2half2_rn(a, b); }
  __device__ static float2 unpack(type v) { return __half22float2(v); }
  __device__ static float2 unpack_word(uint32_t u);
};
template <typename V>
__device__ __forceinline__ uint32_t to_word(V v) {
  uint32_t u;
  memcpy(&u, &v, sizeof(u));
  return u;
}
template <typename V>
__device__ __forceinline__ V from_word(uint32_t u) {
  V v;
  memcpy(&v, &u, sizeof(u));
  return v;
}
__device__ __forceinline__ float2 vec2<__half>::unpack_word(uint32_t u) { return __half22float2(from_word<__half2>(u)); }

// The work unit u: its tile's first row and column, and its range of K slices.
struct Unit {
  int m0, n0, k_begin, k_end;
};
__device__ __forceinline__ Unit unit(const Shape &s, int u) {
  const int tile = u % s.tiles, split = u / s.tiles;
  return {(tile / s.tiles_n) * BM, (tile % s.tiles_n) * BN, split * s.k_tiles / s.splits,
          (split + 1) * s.k_tiles / s.splits};
}

// ------------------------------------------------------------------------------------------------
// producer: one thread keeps the ring full, across all of this CTA's work units

template <Major AM, Major BMJ>
__device__ void produce(const CUtensorMap &a_map, const CUtensorMap &b_map, const Shape &s, char *ring,
                        tk::barrier *full, tk::barrier *empty) {
  int g = 0;  // K slices issued so far: ring slot g % STAGES, pass g / STAGES
  for (int u = blockIdx.x; u < s.tiles * s.splits; u += gridDim.x) {
    const Unit w = unit(s, u);
    for (int kt = w.k_begin; kt < w.k_end; kt++, g++) {
      const int slot = g % STAGES;
      char *a = ring + slot * STAGE_BYTES, *b = a + A_BYTES;
      tk::wait(empty[slot], ((g / STAGES) & 1) ^ 1);
      tk::expect_bytes(full[slot], STAGE_BYTES);
      if constexpr (AM == Major::K) tk::tma::load_async(a, a_map, full[slot], kt * BK, w.m0);
      else
        for (int j = 0; j < BM / BOX; j++) tk::tma::load_async(a + j * BOX_BYTES, a_map, full[slot], w.m0 + j * BOX, kt * BK);
      if constexpr (BMJ == Major::K) tk::tma::load_async(b, b_map, full[slot], kt * BK, w.n0);
      else
        for (int j = 0; j < BN / BOX; j++) tk::tma::load_async(b + j * BOX_BYTES, b_map, full[slot], w.n0 + j * BOX, kt * BK);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// consumer: one K slice of the unit's tile (this warpgroup's 64 rows)

template <typename T, Major AM, Major BMJ>
__device__ __forceinline__ void mma_slice(tk::wg::accumulator<BN> &acc, int consumer, char *ring, tk::barrier *full,
                                          int g, bool first) {
  const int slot = g % STAGES;
  char *a = ring + slot * STAGE_BYTES, *b = a + A_BYTES;
  tk::wait(full[slot], (g / STAGES) & 1);
  tk::wg::mma_fence(acc.v);
  const uint64_t da = AM == Major::K ? tk::wg::desc_k128(a + consumer * 64 * BK * 2)
                                     : tk::wg::desc_mn128(a + consumer * BOX_BYTES, BOX_BYTES);
  const uint64_t db = BMJ == Major::K ? tk::wg::desc_k128(b) : tk::wg::desc_mn128(b, BOX_BYTES);
#pragma unroll
  for (int k = 0; k < BK / 16; k++) {
    const uint64_t dak = AM == Major::K ? tk::wg::desc_advance_k(da, k) : tk::wg::desc_advance_k_mn(da, k);
    const uint64_t dbk = BMJ == Major::K ? tk::wg::desc_advance_k(db, k) : tk::wg::desc_advance_k_mn(db, k);
    tk::wg::wgmma_ss<T, BN, BMJ == Major::MN, AM == Major::MN>(acc.v, dak, dbk, !first || k > 0);
  }
  tk::wg::mma_commit();
}

// After the slice g was issued: wait for the slice before it and give its ring slot back.
__device__ __forceinline__ void retire_previous(tk::wg::accumulator<BN> &acc, tk::barrier *empty, int g, bool first) {
  tk::wg::mma_wait<1>(acc.v);
  if (!first && tk::wg::warpgroup_thread() == 0) tk::arrive(empty[(g - 1) % STAGES]);
}

// ------------------------------------------------------------------------------------------------
// epilogues

struct EpiArgs {
  const float *bias;
  const void *aux;   // dgelu: pre-activation (M, N), row stride ldc
  float *c32;        // store_f32: fp32 output (M, N), row stride ldc
  int64_t ldc;
  bool tanh_gelu;
  bool atomic;       // store_f32 with split K
};

// fp32 result: straight from registers (8-byte stores or atomic adds, 32-byte sectors per quad).
__device__ __forceinline__ void store_f32(const tk::wg::accumulator<BN> &acc, const Unit &w, int row0,
                                          const Shape &s, const EpiArgs &e) {
#pragma unroll
  for (int i = 0; i < acc.REGS; i += 2) {
    const int row = row0 + acc.row(i), col = w.n0 + acc.col(i);
    if (row < s.M && col < s.N) {
      float2 *p = reinterpret_cast<float2 *>(e.c32 + int64_t(row) * e.ldc + col);
      const float2 v = make_float2(acc.v[i], acc.v[i + 1]);
      if (e.atomic) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
        atomicAdd(p, v);  // one 8-byte reduction (sm_90)
#else
        atomicAdd(&p->x, v.x), atomicAdd(&p->y, v.y);  // (never runs: the kernel needs sm_90a)
#endif
      } else {
        *p = v;
      }
    }
  }
}

// A finished 16-bit tile waiting for its epilogue: the accumulator (+ bias for store / gelu) rounded
// to T, two values per 32-bit word (word i / 2 holds acc.v[i], acc.v[i + 1]). Rounding first is what
// PyTorch does too (the GEMM's 16-bit output feeds GELU / GELU'). 64 registers, so that the next
// tile's 128 accumulator registers fit beside it and its epilogue can run during the next mainloop.
template <typename T>
struct Pending {
  uint32_t word[BN / 4];
  Unit unit;
  bool valid;
};

template <typename T, Epilogue E>
__device__ __forceinline__ void round_into(Pending<T> &pend, const tk::wg::accumulator<BN> &acc, const Unit &w,
                                           const Shape &s, const EpiArgs &e) {
  using V = vec2<T>;
#pragma unroll
  for (int i = 0; i < acc.REGS; i += 2) {
    float x0 = acc.v[i], x1 = acc.v[i + 1];
    if constexpr (E == Epilogue::store || E == Epilogue::gelu) {
      const int col = w.n0 + acc.col(i);
      if (e.bias != nullptr && col < s.N) {
        const float2 b = *reinterpret_cast<const float2 *>(e.bias + col);
        x0 += b.x;
        x1 += b.y;
      }
    }
    pend.word[i / 2] = to_word(V::pack(x0, x1));
  }
  pend.unit = w;
  pend.valid = true;
}

// The epilogue of a pending tile runs in PIECES half-boxes (64 rows x 32 columns of this warpgroup,
// 8 words per thread), each placed right after one K slice of the next tile has been issued, so that
// its ALU work runs while that slice's wgmmas do. Piece 2b writes the first half of box b (64 columns)
// into a 128B-swizzled staging buffer, piece 2b + 1 the second half, then TMA stores the box (rows >= M
// and columns >= N are dropped by TMA). The GELU epilogue also writes the pre-activation, with plain
// 4-byte global stores (a second staged box would serialise on its TMA store). The GELU' epilogue reads the forward's pre-activation from global memory one piece
// ahead (`pre`: 8 words), so the loads' latency is hidden too. Callers pass `piece` from fully
// unrolled loops: compile-time indices keep the pending words in registers (ptxas -v: no stack frame).
constexpr int PIECES = 2 * BN / BOX;
constexpr int PIECE_WORDS = BN / 4 / PIECES;

// word k (0..7) of `piece`: accumulator register pair i of the tile, its row and column in the box
__device__ __forceinline__ int piece_pair(int piece, int k) {
  const int cb = piece / 2, j = (piece % 2) * 4 + k / 2;  // j: 8-column group within the box
  return 4 * (cb * BOX / 8 + j) + 2 * (k % 2);            // k % 2: rows r and r + 8
}

template <typename T>
__device__ __forceinline__ void load_pre(uint32_t (&pre)[PIECE_WORDS], const Pending<T> &pend, const int piece,
                                         int consumer, const Shape &s, const EpiArgs &e) {
  const int row0 = pend.unit.m0 + consumer * 64, col0 = pend.unit.n0;
  const T *aux = static_cast<const T *>(e.aux);
#pragma unroll
  for (int k = 0; k < PIECE_WORDS; k++) {
    const int i = piece_pair(piece, k);
    const int row = row0 + tk::wg::accumulator<BN>::row(i), col = col0 + tk::wg::accumulator<BN>::col(i);
    pre[k] = row < s.M && col < s.N ? *reinterpret_cast<const uint32_t *>(aux + int64_t(row) * e.ldc + col) : 0u;
  }
}

template <typename T, Epilogue E>
__device__ __forceinline__ void store_piece(const Pending<T> &pend, const int piece, uint32_t (&pre)[PIECE_WORDS],
                                            int consumer, const Shape &s, const EpiArgs &e, const CUtensorMap &c_map,
                                            char *staging, int &stores) {
  using V = vec2<T>;
  using W = typename V::type;
  const int me = tk::wg::warpgroup_thread(), cb = piece / 2;
  const int row0 = pend.unit.m0 + consumer * 64, col0 = pend.unit.n0 + cb * BOX;
  char *out = staging + (stores & 1) * BOX_BYTES;
  if (piece % 2 == 0) {  // the store that last read the buffer about to be written is done with it
    if (me == 0) tk::bulk_wait_group_read<1>();
    tk::wg::sync(1 + consumer);
  }
#pragma unroll
  for (int k = 0; k < PIECE_WORDS; k++) {
    const int i = piece_pair(piece, k);
    const int r = tk::wg::accumulator<BN>::row(i), c = tk::wg::accumulator<BN>::col(i) - cb * BOX;
    const int offset = tk::wg::swizzle128_offset(r, c);
    uint32_t word = pend.word[i / 2];
    if constexpr (E == Epilogue::gelu) {  // the pre-activation: straight to global memory, no staging
      const int row = row0 + r, col = col0 + c;
      if (row < s.M && col < s.N)
        *reinterpret_cast<uint32_t *>(static_cast<T *>(const_cast<void *>(e.aux)) + int64_t(row) * e.ldc + col) = word;
      const float2 p = V::unpack_word(word);
      word = to_word(V::pack(gelu(p.x, e.tanh_gelu), gelu(p.y, e.tanh_gelu)));
    } else if constexpr (E == Epilogue::dgelu) {
      const float2 p = V::unpack_word(pre[k]), d = V::unpack_word(word);
      word = to_word(V::pack(d.x * gelu_grad(p.x, e.tanh_gelu), d.y * gelu_grad(p.y, e.tanh_gelu)));
    }
    *reinterpret_cast<uint32_t *>(out + offset) = word;
  }
  if constexpr (E == Epilogue::dgelu) {
    if (piece + 1 < PIECES) load_pre(pre, pend, piece + 1, consumer, s, e);
  }
  if (piece % 2 == 1) {
    tk::fence_proxy_async_shared();
    tk::wg::sync(1 + consumer);
    if (me == 0) {
      tk::tma::store_async(c_map, out, col0, row0);
      tk::bulk_commit_group();
    }
    stores++;
  }
}

// ------------------------------------------------------------------------------------------------
// the kernel

template <typename T, Major AM, Major BMJ, Epilogue E>
__global__ void __launch_bounds__(THREADS, 1)
gemm_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
            const __grid_constant__ CUtensorMap c_map,
            const Shape s, const EpiArgs e) {
  extern __shared__ char smem_raw[];
  char *ring = smem_raw + ((1024 - (tk::smem_u32(smem_raw) & 1023)) & 1023);
  __shared__ tk::barrier full[STAGES], empty[STAGES];
  if (threadIdx.x == 0) {
    for (int i = 0; i < STAGES; i++) {
      tk::init(full[i], 1);
      tk::init(empty[i], 2);  // both consumers
    }
    tk::fence_barrier_init();
  }
  __syncthreads();

  const int wg = tk::wg::warpgroupid();
  if (wg == 0) {
    tk::wg::set_max_registers<40>();
    if (tk::wg::warpgroup_thread() == 0) produce<AM, BMJ>(a_map, b_map, s, ring, full, empty);
    return;
  }

  tk::wg::set_max_registers<232>();
  const int consumer = wg - 1;
  char *staging = ring + RING_BYTES + consumer * 2 * BOX_BYTES;
  tk::wg::accumulator<BN> acc;
  Pending<T> pend;
  pend.valid = false;
  uint32_t pre[PIECE_WORDS];  // GELU': the pre-activation of the next piece, loaded one piece ahead
  int g = 0, stores = 0;
  for (int u = blockIdx.x; u < s.tiles * s.splits; u += gridDim.x) {
    const Unit w = unit(s, u);
    int kt = w.k_begin;
    if constexpr (E == Epilogue::store_f32) {
      for (; kt < w.k_end; kt++, g++) {
        mma_slice<T, AM, BMJ>(acc, consumer, ring, full, g, kt == w.k_begin);
        retire_previous(acc, empty, g, kt == w.k_begin);
      }
    } else {
      // the previous tile's epilogue, one piece after each of the first slices (every `step`-th slice
      // when the tile has more than 2 x PIECES slices), while those slices' wgmmas run
      const int step = max(1, (w.k_end - w.k_begin) / PIECES);
#pragma unroll
      for (int piece = 0; piece < PIECES; piece++) {
        const bool mma = kt < w.k_end;
        if (mma) mma_slice<T, AM, BMJ>(acc, consumer, ring, full, g, kt == w.k_begin);
        if (pend.valid) store_piece<T, E>(pend, piece, pre, consumer, s, e, c_map, staging, stores);
        if (mma) {
          retire_previous(acc, empty, g, kt == w.k_begin);
          kt++, g++;
        }
        for (int i = 1; i < step && kt < w.k_end; i++, kt++, g++) {
          mma_slice<T, AM, BMJ>(acc, consumer, ring, full, g, false);
          retire_previous(acc, empty, g, false);
        }
      }
      for (; kt < w.k_end; kt++, g++) {
        mma_slice<T, AM, BMJ>(acc, consumer, ring, full, g, kt == w.k_begin);
        retire_previous(acc, empty, g, kt == w.k_begin);
      }
    }
    tk::wg::mma_wait<0>(acc.v);
    if (tk::wg::warpgroup_thread() == 0) tk::arrive(empty[(g - 1) % STAGES]);
    if constexpr (E == Epilogue::store_f32) store_f32(acc, w, w.m0 + consumer * 64, s, e);
    else {
      round_into<T, E>(pend, acc, w, s, e);
      if constexpr (E == Epilogue::dgelu) load_pre(pre, pend, 0, consumer, s, e);
    }
  }
  if constexpr (E != Epilogue::store_f32) {
    if (pend.valid) {
#pragma unroll
      for (int piece = 0; piece < PIECES; piece++)
        store_piece<T, E>(pend, piece, pre, consumer, s, e, c_map, staging, stores);
    }
    if (tk::wg::warpgroup_thread() == 0) tk::bulk_wait_group<0>();
  }
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

// TMA map of an operand: K-major (rows = M or N, cols = K, box 64 x rows_per_box) or MN-major
// (rows = K, cols = M or N, box 64 x 64).
template <typename T>
CUtensorMap operand_map(const void *ptr, Major major, int mn, int K, int64_t ld, int tile_rows) {
  if (major == Major::K) return tk::host::matrix_map<T>(ptr, mn, K, ld, tile_rows, BK, 128);
  return tk::host::matrix_map<T>(ptr, K, mn, ld, BK, BOX, 128);
}

template <typename T, Major AM, Major BMJ, Epilogue E>
cudaError_t launch(const GemmParams &p, const Shape &s, cudaStream_t stream) {
  const CUtensorMap a_map = operand_map<T>(p.a, AM, p.M, p.K, p.lda, BM);
  const CUtensorMap b_map = operand_map<T>(p.b, BMJ, p.N, p.K, p.ldb, BN);
  CUtensorMap c_map{};
  if constexpr (E != Epilogue::store_f32) c_map = tk::host::matrix_map<T>(p.c, p.M, p.N, p.ldc, 64, BOX, 128);
  const EpiArgs e{p.bias, p.aux, static_cast<float *>(p.c), p.ldc, p.tanh_gelu, s.splits > 1};
  auto kernel = gemm_kernel<T, AM, BMJ, E>;
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
  if (err != cudaSuccess) return err;
  const int grid = std::min(sm_count(), s.tiles * s.splits);
  kernel<<<grid, THREADS, SMEM_BYTES, stream>>>(a_map, b_map, c_map, s, e);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dispatch(const GemmParams &p, const Shape &s, cudaStream_t stream, const char **why) {
  using M = Major;
  using E = Epilogue;
  const M a = p.a_major, b = p.b_major;
  const E epi = p.epilogue;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    if (a == M::K && b == M::K && epi == E::gelu) return launch<T, M::K, M::K, E::gelu>(p, s, stream);
    if (a == M::K && b == M::MN && epi == E::dgelu) return launch<T, M::K, M::MN, E::dgelu>(p, s, stream);
  }
  if (why) *why = "dev v1 gemm: only the bf16 gelu and dgelu kernels are built";
  return cudaErrorInvalidValue;
}

}  // namespace

int gemm_splits(int M, int N, int K, int sms) {
  const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN), k_tiles = (K + BK - 1) / BK;
  return tk::host::wave_filling_splits(tiles, k_tiles, sms);
}

cudaError_t gemm(const GemmParams &p, cudaStream_t stream, const char **why) {
  auto fail = [&](const char *reason) {
    if (why) *why = reason;
    return cudaErrorInvalidValue;
  };
  if (p.M < 0 || p.N <= 0 || p.K <= 0) return fail("tk mlp gemm: N and K must be positive");
  if (p.N % 8) return fail("tk mlp gemm: N must be a multiple of 8");
  if (p.K % 8 && (p.a_major == Major::K || p.b_major == Major::K))
    return fail("tk mlp gemm: K must be a multiple of 8 when an operand is K-major");
  if (p.M == 0) return cudaSuccess;
  if ((p.epilogue == Epilogue::gelu || p.epilogue == Epilogue::dgelu) && p.aux == nullptr)
    return fail("tk mlp gemm: the GELU epilogues need the pre-activation buffer");
  Shape s{p.M, p.N, p.K, (p.N + BN - 1) / BN, 0, (p.K + BK - 1) / BK, 1};
  s.tiles = ((p.M + BM - 1) / BM) * s.tiles_n;
  if (p.epilogue == Epilogue::store_f32)
    s.splits = std::max(1, std::min(p.splits > 0 ? p.splits : gemm_splits(p.M, p.N, p.K, sm_count()), s.k_tiles));
  try {
    return p.dtype == DType::bf16 ? dispatch<__nv_bfloat16>(p, s, stream, why) : dispatch<__half>(p, s, stream, why);
  } catch (const std::exception &ex) {  // a tensor map the driver rejects (alignment, strides)
    static thread_local std::string reason;
    reason = std::string("tk mlp gemm: ") + ex.what();
    return fail(reason.c_str());
  }
}

}  // namespace tk_mlp
