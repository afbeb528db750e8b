// The MLP family's GEMM (sm_90a): C[M x N] = sum_k A(m, k) B(n, k), bf16/fp16 in, fp32 accumulate,
// with the epilogues of an MLP's forward (bias, bias + GELU) and backward (GELU', fp32 weight
// gradients). Launcher interface and operand layouts: mlp.h.
//
// Structure: both kernels are tk::pipeline descriptions (include/pipeline/producer_consumer.cuh owns the
// ring, its mbarriers and phases, setmaxnreg, the producer's TMA loop, the persistent item loop and the
// deferred-epilogue interleave); this file states the tile logic: the stage (one K slice of A and B),
// load_slice, mma_slice, the walks over work units and the epilogues. Ported from the hand-written
// version with the same SASS budget (cuobjdump, sm_90a, every instantiation: 168 registers, no stack,
// no LDL / STL, the same HGMMA / UTMALDG / UTMASTG / BAR counts; instructions -0.2% to -6% for the 16-bit
// epilogues, -11% for the fp32 store (its address arithmetic)).
//
// Algorithm (grown from dev/hopper/gemm.cu, whose version 2 measured 0.99-1.03x cuBLAS at the GPT-2
// shapes on an H200): a persistent grid of min(#SMs, #work units) CTAs of three warpgroups.
//   - warpgroup 0, the producer (40 registers after setmaxnreg), has one thread issue the TMA loads of
//     a 4-stage (GELU / GELU': 3) ring of K slices: per slice a 128 x 64 A tile and a 256 x 64 B tile (48 KB), 128-byte
//     swizzled. K-major operands are one box each; MN-major operands are loaded as [64 K rows x 64]
//     boxes side by side (2 for A, 4 for B), the layout desc_mn128 describes. Out-of-bounds rows and
//     columns are zero-filled by TMA, so any M and ragged N / K tiles need no padding.
//   - warpgroups 1 and 2, the consumers (232 registers), each own 64 of the tile's 128 rows and run
//     m64n256k16 wgmma over the ring (the MN-major operands with the transpose flag), one group in
//     flight; a slot is released when the group that read it has completed.
//   - deferred epilogue, plain 16-bit store: a finished tile is rounded to 16 bits (+ bias) into 64
//     registers beside the next tile's accumulator, and its epilogue (128B-swizzled 8 KB staging buffer,
//     TMA store that drops rows >= M and columns >= N) runs in 8 pieces, each right after one K slice of
//     the next tile was issued, while that slice's wgmmas run. Measured: took x W^T from 0.95-1.08x to
//     1.01-1.10x cuBLAS.
//   - staged epilogue, GELU / GELU' (3-stage ring): the finished tile is rounded (+ bias) into a 32 KB
//     shared tile per consumer and its 8 pieces are a rolled loop over 16-byte chunks of that tile (the
//     register version unrolled to 250-320 KB of SASS, streamed through the instruction caches; see "staged
//     epilogues"). GELU' reads the pre-activation with coalesced 16-byte loads two pieces ahead and can
//     write the column sums of its output per 64-row block (the MLP's bias gradient); GELU writes the
//     pre-activation with TMA stores of the staged tile. The staging loads the tile's bias with all 32
//     loads in flight (tile_bias): GELU 180 -> 170 us at (16384, 3072, 768) on an H100, bitwise the same.
//   - fp32 outputs (weight gradients) are written from registers after their tile, atomically added
//     when K is split. A stream-K alternative (one wave of equal contiguous K ranges, an MLP's two weight
//     gradients per launch) measured no faster on the H200 (dW 1.03x / 1.01x of split-K at C = 768, 0.88x /
//     0.85x at C = 1024; bench/RESULTS.md session 5) and was removed (git show
//     466c0a1:tk_kernels/families/mlp/csrc/gemm.cu, with dev/hopper/check_mlp_dw.py).
//   - the producer runs ahead into the next work unit, so the loads of one tile overlap the end of the
//     one before.
// Work units: tiles of 128 x 256 (n fastest: neighbouring CTAs share A's rows); for weight gradients
// (M x N = C x 4C, only 72 tiles at C = 768 for 132 SMs) K is split so that the units fill whole waves
// (gemm_splits), split-major so that CTAs running together read the same K rows (they fit in L2).
// Shared memory: 4 x 48 KB ring + 2 consumers x 2 x 8 KB staging + 1 KB alignment = 225 KB; GELU / GELU':
// 3 x 48 KB ring + 2 consumers x 32 KB tile + 1 KB = 209 KB.
// Measured (H200, bf16, bench/bench_mlp.py, bench/RESULTS.md): x W^T 0.96x cuBLAS at 8192^3 and 1.01-1.10x at
// the GPT-2 shapes; dy W 1.01-1.06x; dy^T x (split K, fp32 atomics) 0.84-0.93x. The register-pending GELU and
// GELU' epilogues (dev/hopper/mlp_gemm_v1.cu) measured 0.58x / 0.42x of cuBLAS + a separate PyTorch
// elementwise kernel at (16384, 3072, 768); the staged ones (below) measured, same shape: GELU 0.164 ms vs
// 0.189 (1.15x), GELU' 0.182 vs 0.211 (1.16x), GELU' + the bias column sums 0.203 vs 0.251 (1.24x); at
// (16384, 4096, 1024) 1.10x / 1.10x / 1.17x; at (16384, 8192, 2048) 0.91x / 0.96x / 1.03x (the plain store
// of the same products: 0.120 / 0.113 ms at the first shape; dev/hopper/check_mlp_epilogue.py, session 4).
#include <algorithm>
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

#include "gelu.cuh"
#include "mlp.h"

namespace tk_mlp {
namespace {

constexpr int BM = 128, BN = 256, BK = 64;
constexpr int BOX = 64;                          // MN-major load boxes and store boxes: 64 x 64
constexpr int BOX_BYTES = BOX * BOX * 2;         // 8 KB
constexpr int A_BYTES = BM * BK * 2, B_BYTES = BN * BK * 2;
constexpr int TILE_BYTES = 64 * BN * 2;          // one consumer's 64 x 256 16-bit tile (4 boxes): 32 KB
constexpr int SUM_BYTES = 2 * 2 * 4 * BOX * 4;   // GELU' column sums: 2 boxes x 2 pieces x 4 warps x 64 fp32
constexpr int THREADS = 384;

// The GELU epilogues stage their whole tile in shared memory (see "staged epilogues" below): 2 x 36 KB,
// paid for with one ring stage (3 x 48 KB). The others keep the 4-stage ring and 2 x 2 store boxes.
constexpr bool staged(Epilogue E) { return E == Epilogue::gelu || E == Epilogue::dgelu; }
constexpr int ring_stages(Epilogue E) { return staged(E) ? 3 : 4; }
constexpr int epilogue_bytes(Epilogue E) { return 2 * (staged(E) ? TILE_BYTES + SUM_BYTES : 2 * BOX_BYTES); }

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
// the ring (tk::pipeline owns its barriers and phases): one stage is one K slice of both operands

struct alignas(1024) Stage {
  char a[A_BYTES];  // 128 x 64 of A: one K-major box, or 2 MN-major [64 K rows x 64] boxes side by side
  char b[B_BYTES];  // 256 x 64 of B: one K-major box, or 4 MN-major boxes
};
using Slot = tk::pipeline::slot<Stage>;

// producer: the TMA loads of K slice kt of the tile (m0, n0) into a ring slot
template <Major AM, Major BMJ>
__device__ __forceinline__ void load_slice(const Slot &s, const CUtensorMap &a_map, const CUtensorMap &b_map, int m0,
                                           int n0, int kt) {
  if constexpr (AM == Major::K) tk::tma::load_async(s.tiles.a, a_map, s.full(), kt * BK, m0);
  else
    for (int j = 0; j < BM / BOX; j++) tk::tma::load_async(s.tiles.a + j * BOX_BYTES, a_map, s.full(), m0 + j * BOX, kt * BK);
  if constexpr (BMJ == Major::K) tk::tma::load_async(s.tiles.b, b_map, s.full(), kt * BK, n0);
  else
    for (int j = 0; j < BN / BOX; j++) tk::tma::load_async(s.tiles.b + j * BOX_BYTES, b_map, s.full(), n0 + j * BOX, kt * BK);
}

// consumer: one K slice of the tile (this warpgroup's 64 rows), issued as one wgmma group; `first`
// starts the accumulator from zero. The group stays in flight: retire() (mma_wait<1>) lets the
// pipeline free the slot before it, drain() (mma_wait<0>) the last one.
template <typename T, Major AM, Major BMJ>
__device__ __forceinline__ void mma_slice(tk::wg::accumulator<BN> &acc, int consumer, const Stage &st, bool first) {
  tk::wg::mma_fence(acc.v);
  const uint64_t da = AM == Major::K ? tk::wg::desc_k128(st.a + consumer * 64 * BK * 2)
                                     : tk::wg::desc_mn128(st.a + consumer * BOX_BYTES, BOX_BYTES);
  const uint64_t db = BMJ == Major::K ? tk::wg::desc_k128(st.b) : tk::wg::desc_mn128(st.b, BOX_BYTES);
#pragma unroll
  for (int k = 0; k < BK / 16; k++) {
    const uint64_t dak = AM == Major::K ? tk::wg::desc_advance_k(da, k) : tk::wg::desc_advance_k_mn(da, k);
    const uint64_t dbk = BMJ == Major::K ? tk::wg::desc_advance_k(db, k) : tk::wg::desc_advance_k_mn(db, k);
    tk::wg::wgmma_ss<T, BN, BMJ == Major::MN, AM == Major::MN>(acc.v, dak, dbk, !first || k > 0);
  }
  tk::wg::mma_commit();
}

// ------------------------------------------------------------------------------------------------
// epilogues

struct EpiArgs {
  const float *bias;
  const void *aux;   // dgelu: pre-activation (M, N), row stride ldc
  float *c32;        // store_f32: fp32 output (M, N), row stride ldc
  int64_t ldc;
  float *colsum;     // dgelu: column sums of C per 64-row block ((M + 63) / 64, N), or nullptr
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

// Plain 16-bit store. A finished tile waiting for its epilogue: the accumulator + bias rounded to T, two
// values per 32-bit word (word i / 2 holds acc.v[i], acc.v[i + 1]). 64 registers, so that the next
// tile's 128 accumulator registers fit beside it and its epilogue can run during the next mainloop.
template <typename T>
struct Pending {
  uint32_t word[BN / 4];
  Unit unit;
};

template <typename T>
__device__ __forceinline__ void round_into(Pending<T> &pend, const tk::wg::accumulator<BN> &acc, const Unit &w,
                                           const Shape &s, const EpiArgs &e) {
  using V = vec2<T>;
#pragma unroll
  for (int i = 0; i < acc.REGS; i += 2) {
    float x0 = acc.v[i], x1 = acc.v[i + 1];
    const int col = w.n0 + acc.col(i);
    if (e.bias != nullptr && col < s.N) {
      const float2 b = *reinterpret_cast<const float2 *>(e.bias + col);
      x0 += b.x;
      x1 += b.y;
    }
    pend.word[i / 2] = to_word(V::pack(x0, x1));
  }
  pend.unit = w;
}

// The epilogue of a pending tile runs in PIECES half-boxes (64 rows x 32 columns of this warpgroup,
// 8 words per thread), each placed right after one K slice of the next tile has been issued, so that
// its work runs while that slice's wgmmas do. Piece 2b writes the first half of box b (64 columns)
// into a 128B-swizzled staging buffer, piece 2b + 1 the second half, then TMA stores the box (rows >= M
// and columns >= N are dropped by TMA). Callers pass `piece` from fully unrolled loops: compile-time
// indices keep the pending words in registers (ptxas -v: no stack frame). The plain store's pieces are
// a few instructions each, so the unrolled code stays small (75 KB of SASS); the GELU epilogues, whose
// pieces are not, are staged in shared memory instead (below).
constexpr int PIECES = 2 * BN / BOX;
constexpr int PIECE_WORDS = BN / 4 / PIECES;

// word k (0..7) of `piece`: accumulator register pair i of the tile, its row and column in the box
__device__ __forceinline__ int piece_pair(int piece, int k) {
  const int cb = piece / 2, j = (piece % 2) * 4 + k / 2;  // j: 8-column group within the box
  return 4 * (cb * BOX / 8 + j) + 2 * (k % 2);            // k % 2: rows r and r + 8
}

template <typename T>
__device__ __forceinline__ void store_piece(const Pending<T> &pend, const int piece, int consumer,
                                            const CUtensorMap &c_map, char *staging, int &stores) {
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
    *reinterpret_cast<uint32_t *>(out + tk::wg::swizzle128_offset(r, c)) = pend.word[i / 2];
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
// staged epilogues (GELU, GELU'): the finished tile goes to shared memory, its epilogue is a rolled loop
//
// Keeping the pending tile in 64 registers (above) needs every register index to be a compile-time
// constant, so the 8 pieces, each with 16 inlined erff / expf / tanhf evaluations, were unrolled twice
// (inside the next mainloop and after the last tile) and for both GELU forms: 250-320 KB of SASS per
// kernel, most of it in the per-tile loop, which then streams through the SM's instruction caches every
// tile (the likely cause; the plain store kernel, which runs at cuBLAS speed, is 73 KB). Measured: GELU 0.58x
// and GELU' 0.42x of cuBLAS + a separate PyTorch elementwise kernel. Here a finished tile is rounded to
// 16 bits (+ bias) into this consumer's 32 KB tile buffer (4 128B-swizzled 64 x 64 boxes, the layout of
// the TMA store), and each piece reads 16-byte chunks back by a runtime index: one piece's code (2.5 KB
// tanh, 4.6 KB erf) serves all 8 (the kernels are 47-56 KB). Piece p covers rows 32 (p % 2) .. + 31 of box p / 2: thread t the chunks
// (rows 16 j + t / 8, chunk t % 8), j = 0, 1, so 8 threads read one full 128-byte row (no bank
// conflicts, and for GELU' one full 128-byte line of the pre-activation per 8 threads from global
// memory, loaded two pieces ahead). Results are written back in place; after the second piece of a box
// it is TMA-stored. GELU writes the pre-activation with 4 TMA stores of the staged tile (a second
// tensor map) before the first piece overwrites it.

// byte offset of 16-byte chunk `chunk` (0..7) of row r in a 128B-swizzled 64 x 64 box
__device__ __forceinline__ int chunk_offset(int r, int chunk) { return r * 128 + ((chunk ^ (r & 7)) << 4); }

// The bias of this thread's 32 column pairs of the tile (zero without a bias, or past N), every load issued before
// any is used. Written as a branch around each load (`if (col < N) b = bias[col]`), ptxas kept every load in its own
// branch and used it at once: 32 dependent global round trips per tile while the tensor pipe waited between tiles
// (SASS of the GELU kernel, session 20). Here the loads are unconditional at a clamped column (N is a multiple of 8
// and the column even, so col + 1 < N whenever col < N) and the ones past N are zeroed afterwards.
__device__ __forceinline__ void tile_bias(float2 (&b)[BN / 8], const tk::wg::accumulator<BN> &acc, int n0,
                                          const Shape &s, const float *bias) {
#pragma unroll
  for (int k = 0; k < BN / 8; k++) b[k] = make_float2(0.f, 0.f);
  if (bias == nullptr) return;
#pragma unroll
  for (int k = 0; k < BN / 8; k++)
    b[k] = __ldg(reinterpret_cast<const float2 *>(bias + min(n0 + acc.col(4 * k), s.N - 2)));
#pragma unroll
  for (int k = 0; k < BN / 8; k++)
    if (n0 + acc.col(4 * k) >= s.N) b[k] = make_float2(0.f, 0.f);
}

template <typename T, Epilogue E>
__device__ __forceinline__ void stage_tile(char *tile, const tk::wg::accumulator<BN> &acc, const Unit &w,
                                           const Shape &s, const EpiArgs &e) {
  using V = vec2<T>;
  float2 b[BN / 8];  // b[i / 4]: the bias of the column pair of v[i .. i + 3] (GELU' has none: zeros)
  tile_bias(b, acc, w.n0, s, E == Epilogue::gelu ? e.bias : nullptr);
#pragma unroll
  for (int i = 0; i < acc.REGS; i += 4) {  // v[i], v[i + 1] (row r) and v[i + 2], v[i + 3] (row r + 8): one column pair
    const int c = acc.col(i), box = i / 32;  // 8-column group i / 4, 8 groups per box
#pragma unroll
    for (int h = 0; h < 4; h += 2)
      *reinterpret_cast<uint32_t *>(tile + box * BOX_BYTES + tk::wg::swizzle128_offset(acc.row(i + h), c - box * BOX)) =
          to_word(V::pack(acc.v[i + h] + b[i / 4].x, acc.v[i + h + 1] + b[i / 4].y));
  }
}

// GELU': the pre-activation chunks of `piece` of the pending tile pw (zero outside the matrix)
template <typename T>
__device__ __forceinline__ void load_pre_chunks(uint4 (&pre)[2], const Unit &pw, int piece, int consumer,
                                                const Shape &s, const EpiArgs &e) {
  const int me = tk::wg::warpgroup_thread();
  const T *aux = static_cast<const T *>(e.aux);
  const int col = pw.n0 + (piece / 2) * BOX + (me % 8) * 8;
#pragma unroll
  for (int j = 0; j < 2; j++) {
    const int row = pw.m0 + consumer * 64 + (piece % 2) * 32 + j * 16 + me / 8;
    pre[j] = row < s.M && col < s.N ? *reinterpret_cast<const uint4 *>(aux + int64_t(row) * e.ldc + col)
                                    : make_uint4(0u, 0u, 0u, 0u);
  }
}

template <typename T, Epilogue E, bool TANH>
__device__ __forceinline__ void staged_piece(char *tile, int piece, const uint4 (&pre)[2], float (&cs)[8]) {
  using V = vec2<T>;
  const int me = tk::wg::warpgroup_thread();
  char *box = tile + (piece / 2) * BOX_BYTES;
#pragma unroll
  for (int j = 0; j < 2; j++) {
    uint4 *p = reinterpret_cast<uint4 *>(box + chunk_offset((piece % 2) * 32 + j * 16 + me / 8, me % 8));
    const uint4 v = *p;
    uint32_t w[4] = {v.x, v.y, v.z, v.w};
    const uint32_t a[4] = {pre[j].x, pre[j].y, pre[j].z, pre[j].w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
      const float2 x = V::unpack_word(w[k]);
      if constexpr (E == Epilogue::gelu) {
        w[k] = to_word(V::pack(gelu(x.x, TANH), gelu(x.y, TANH)));
      } else {
        const float2 q = V::unpack_word(a[k]);
        w[k] = to_word(V::pack(x.x * gelu_grad(q.x, TANH), x.y * gelu_grad(q.y, TANH)));
        const float2 y = V::unpack_word(w[k]);  // the column sums add the rounded outputs, as a sum of C would
        cs[2 * k] += y.x;
        cs[2 * k + 1] += y.y;
      }
    }
    *p = make_uint4(w[0], w[1], w[2], w[3]);
  }
}

// One piece of the pending tile pw's epilogue. GELU': `pre` holds this piece's pre-activation chunks and
// the next piece's on entry, the next two pieces' on return (loads two pieces ahead: ~1.5 us of slices);
// with e.colsum, the box's column sums: per thread 8 columns over its 2 rows (cs), over the warp's 8 rows
// of the piece by two shuffles, over the 4 warps and 2 pieces through `sums` (double-buffered by box)
// after the box's barrier, then one plain store per column into the 64-row block's row of colsum (each
// element written once: no zeroing, no atomics).
template <typename T, Epilogue E>
__device__ __forceinline__ void epilogue_piece(char *tile, int piece, const Unit &pw, int consumer, const Shape &s,
                                               const EpiArgs &e, const CUtensorMap &c_map, uint4 (&pre)[2][2]) {
  const int me = tk::wg::warpgroup_thread();
  const uint4 cur[2] = {pre[0][0], pre[0][1]};
  if constexpr (E == Epilogue::dgelu) {
    pre[0][0] = pre[1][0];
    pre[0][1] = pre[1][1];
    if (piece + 2 < PIECES) load_pre_chunks<T>(pre[1], pw, piece + 2, consumer, s, e);
  }
  if constexpr (E == Epilogue::gelu) {
    if (piece == 0) {  // the pre-activation's TMA stores are done reading the tile before it is overwritten
      if (me == 0) tk::bulk_wait_group_read<0>();
      tk::wg::sync(1 + consumer);
    }
  }
  float cs[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  if (e.tanh_gelu) staged_piece<T, E, true>(tile, piece, cur, cs);
  else staged_piece<T, E, false>(tile, piece, cur, cs);
  const int b = piece / 2;
  float *sums = reinterpret_cast<float *>(tile + TILE_BYTES) + (b % 2) * 2 * 4 * BOX;  // [piece % 2][warp][64]
  if constexpr (E == Epilogue::dgelu) {
    if (e.colsum != nullptr) {
#pragma unroll
      for (int k = 0; k < 8; k++) {  // lanes l, l ^ 8, l ^ 16, l ^ 24 hold the same 8 columns
        cs[k] += __shfl_xor_sync(0xffffffffu, cs[k], 8);
        cs[k] += __shfl_xor_sync(0xffffffffu, cs[k], 16);
      }
      const int lane = me % 32, warp = me / 32;
      if (lane < 8) {
        float4 *d = reinterpret_cast<float4 *>(sums + ((piece % 2) * 4 + warp) * BOX + lane * 8);
        d[0] = make_float4(cs[0], cs[1], cs[2], cs[3]);
        d[1] = make_float4(cs[4], cs[5], cs[6], cs[7]);
      }
    }
  }
  if (piece % 2 == 1) {
    tk::fence_proxy_async_shared();
    tk::wg::sync(1 + consumer);
    if (me == 0) {
      tk::tma::store_async(c_map, tile + b * BOX_BYTES, pw.n0 + b * BOX, pw.m0 + consumer * 64);
      tk::bulk_commit_group();
    }
    if constexpr (E == Epilogue::dgelu) {
      const int col = pw.n0 + b * BOX + me;
      if (e.colsum != nullptr && me < BOX && col < s.N && pw.m0 + consumer * 64 < s.M) {
        float v = 0.f;
#pragma unroll
        for (int q = 0; q < 8; q++) v += sums[q * BOX + me];
        e.colsum[int64_t(pw.m0 / 64 + consumer) * s.N + col] = v;
      }
    }
  }
}

// ------------------------------------------------------------------------------------------------
// the kernel: a tk::pipeline description (pipeline/producer_consumer.cuh), read top to bottom

struct GemmGlobals {
  const CUtensorMap &a_map, &b_map, &c_map, &aux_map;
  const Shape &s;
  const EpiArgs &e;
};

// The persistent walk: CTA b takes work units b, b + gridDim.x, ...
struct UnitWalk {
  const Shape &s;
  int u;
  __device__ UnitWalk(const GemmGlobals &g) : s(g.s), u(blockIdx.x) {}
  __device__ bool next(Unit &w) {
    if (u >= s.tiles * s.splits) return false;
    w = unit(s, u);
    u += gridDim.x;
    return true;
  }
};

// One consumer warpgroup: its 64 rows of every tile, accumulated slice by slice, then the epilogue E.
// The 16-bit epilogues are deferred: the pipeline runs a finished tile's PIECES pieces while the next
// tile's first slices are in flight (unrolled for the register-held pending tile of the plain store).
template <typename T, Major AM, Major BMJ, Epilogue E>
struct GemmConsumer {
  static constexpr int DEFERRED_PIECES = E == Epilogue::store_f32 ? 0 : PIECES;
  static constexpr bool UNROLL_PIECES = E == Epilogue::store;
  const GemmGlobals &g;
  const int id;
  char *epi;                    // this consumer's half of the epilogue buffers (scratch after the ring)
  tk::wg::accumulator<BN> acc;
  Pending<T> pend;              // store: the tile waiting for its pieces
  int stores = 0;               // store: TMA stores issued (staging buffer parity)
  Unit pw{};                    // GELU, GELU': the tile staged in epi
  uint4 pre[2][2] = {};         // GELU': the pre-activation chunks of the next two pieces

  __device__ GemmConsumer(const GemmGlobals &g, const tk::pipeline::consumer_ctx<> &ctx)
      : g(g), id(ctx.id), epi(ctx.scratch + ctx.id * (epilogue_bytes(E) / 2)) {}

  __device__ void compute(const Slot &s, int i) { mma_slice<T, AM, BMJ>(acc, id, s.tiles, i == 0); }
  __device__ void retire() { tk::wg::mma_wait<1>(acc.v); }
  __device__ void drain() { tk::wg::mma_wait<0>(acc.v); }

  __device__ void finish(const Unit &w) {
    if constexpr (E == Epilogue::store_f32) {
      store_f32(acc, w, w.m0 + id * 64, g.s, g.e);
    } else if constexpr (E == Epilogue::store) {
      round_into<T>(pend, acc, w, g.s, g.e);
    } else {
      const int me = tk::wg::warpgroup_thread();
      // the previous tile's last TMA store is done reading the tile buffer before it is overwritten
      if (me == 0) tk::bulk_wait_group_read<0>();
      tk::wg::sync(1 + id);
      stage_tile<T, E>(epi, acc, w, g.s, g.e);
      if constexpr (E == Epilogue::gelu) tk::fence_proxy_async_shared();
      tk::wg::sync(1 + id);
      if constexpr (E == Epilogue::gelu) {
        if (me == 0) {
          for (int b = 0; b < BN / BOX; b++)
            tk::tma::store_async(g.aux_map, epi + b * BOX_BYTES, w.n0 + b * BOX, w.m0 + id * 64);
          tk::bulk_commit_group();
        }
      } else {
        load_pre_chunks<T>(pre[0], w, 0, id, g.s, g.e);
        load_pre_chunks<T>(pre[1], w, 1, id, g.s, g.e);
      }
      pw = w;
    }
  }

  __device__ void deferred(int piece) {
    if constexpr (E == Epilogue::store) store_piece<T>(pend, piece, id, g.c_map, epi, stores);
    else if constexpr (staged(E)) epilogue_piece<T, E>(epi, piece, pw, id, g.s, g.e, g.c_map, pre);
  }

  __device__ void last() {
    if constexpr (E != Epilogue::store_f32) {
      if (tk::wg::warpgroup_thread() == 0) tk::bulk_wait_group<0>();
    }
  }
};

template <typename T, Major AM, Major BMJ, Epilogue E>
struct GemmPipe {
  using globals = GemmGlobals;
  using stage = Stage;
  using work = Unit;
  using scheduler = UnitWalk;
  using consumer = GemmConsumer<T, AM, BMJ, E>;
  static constexpr int STAGES = ring_stages(E), CONSUMERS = 2, PRODUCER_REGS = 40, CONSUMER_REGS = 232;
  static constexpr int SCRATCH_BYTES = epilogue_bytes(E);
  __device__ static int iterations(const GemmGlobals &, const Unit &w) { return w.k_end - w.k_begin; }
  __device__ static void load(const Slot &s, const GemmGlobals &g, const Unit &w, int i) {
    load_slice<AM, BMJ>(s, g.a_map, g.b_map, w.m0, w.n0, w.k_begin + i);
  }
};
template <typename T, Major AM, Major BMJ, Epilogue E>
using GemmPipeline = tk::pipeline::kernel<GemmPipe<T, AM, BMJ, E>>;

template <typename T, Major AM, Major BMJ, Epilogue E>
__global__ void __launch_bounds__(THREADS, 1)
gemm_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
            const __grid_constant__ CUtensorMap c_map, const __grid_constant__ CUtensorMap aux_map,
            const Shape s, const EpiArgs e) {
  GemmPipeline<T, AM, BMJ, E>::run(GemmGlobals{a_map, b_map, c_map, aux_map, s, e});
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
  CUtensorMap c_map{}, aux_map{};
  if constexpr (E != Epilogue::store_f32) c_map = tk::host::matrix_map<T>(p.c, p.M, p.N, p.ldc, 64, BOX, 128);
  if constexpr (E == Epilogue::gelu) aux_map = tk::host::matrix_map<T>(p.aux, p.M, p.N, p.ldc, 64, BOX, 128);
  const EpiArgs e{p.bias, p.aux, static_cast<float *>(p.c), p.ldc, p.colsum, p.tanh_gelu, s.splits > 1};
  auto kernel = gemm_kernel<T, AM, BMJ, E>;
  constexpr int smem = GemmPipeline<T, AM, BMJ, E>::SHARED_BYTES;
  static_assert(GemmPipeline<T, AM, BMJ, E>::THREADS == THREADS);
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  const int grid = std::min(sm_count(), s.tiles * s.splits);
  kernel<<<grid, THREADS, smem, stream>>>(a_map, b_map, c_map, aux_map, s, e);
  return cudaGetLastError();
}

template <typename T>
cudaError_t dispatch(const GemmParams &p, const Shape &s, cudaStream_t stream, const char **why) {
  using M = Major;
  using E = Epilogue;
  const M a = p.a_major, b = p.b_major;
  const E epi = p.epilogue;
  if (a == M::K && b == M::K && epi == E::store) return launch<T, M::K, M::K, E::store>(p, s, stream);
  if (a == M::K && b == M::K && epi == E::gelu) return launch<T, M::K, M::K, E::gelu>(p, s, stream);
  if (a == M::K && b == M::MN && epi == E::store) return launch<T, M::K, M::MN, E::store>(p, s, stream);
  if (a == M::K && b == M::MN && epi == E::dgelu) return launch<T, M::K, M::MN, E::dgelu>(p, s, stream);
  if (a == M::MN && b == M::MN && epi == E::store_f32) return launch<T, M::MN, M::MN, E::store_f32>(p, s, stream);
  if (why) *why = "tk mlp gemm: unsupported combination of operand layouts and epilogue";
  return cudaErrorInvalidValue;
}

}  // namespace

int gemm_splits(int M, int N, int K, int sms) {
  const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN), k_tiles = (K + BK - 1) / BK;
  if (tiles >= sms) return 1;
  // the fewest splits whose units fill >= 90% of the waves they take, keeping >= 4 K slices per unit
  int best = 1;
  double best_fill = 0.0;
  for (int splits = 1; splits <= 16 && splits * 4 <= k_tiles; splits++) {
    const int units = tiles * splits, waves = (units + sms - 1) / sms;
    const double fill = double(units) / (double(waves) * sms);
    if (fill >= 0.9) return splits;
    if (fill > best_fill) best = splits, best_fill = fill;
  }
  return best;
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
  if (p.colsum != nullptr && p.epilogue != Epilogue::dgelu)
    return fail("tk mlp gemm: only the GELU' epilogue writes column sums");
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
