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
// shapes on an H200): a persistent grid of min(#SMs, #work units) CTAs.
//   - warpgroup 0, the producer, has one thread issue the TMA loads of a 4-stage ring of K slices: per slice a
//     128 x 64 A tile and a 256 x 64 B tile (48 KB; GELU / GELU': 192 x 64, 40 KB), 128-byte swizzled. K-major
//     operands are one box each; MN-major operands are loaded as [64 K rows x 64] boxes side by side (2 for A,
//     4 or 3 for B), the layout desc_mn128 describes. Out-of-bounds rows and columns are zero-filled by TMA, so
//     any M and ragged N / K tiles need no padding.
//   - warpgroups 1 and 2, the consumers, each own 64 of the tile's 128 rows and run m64n256k16 (GELU / GELU':
//     m64n192k16) wgmma over the ring (the MN-major operands with the transpose flag), one group in flight; a
//     slot is released when the group that read it has completed.
//   - plain 16-bit store (3 warpgroups; producer 40 registers after setmaxnreg, consumers 232): deferred. A
//     finished tile is rounded to 16 bits (+ bias) into 64 registers beside the next tile's accumulator, and
//     its epilogue (128B-swizzled 8 KB staging buffer, TMA store that drops rows >= M and columns >= N) runs
//     in 8 pieces, each right after one K slice of the next tile was issued, while that slice's wgmmas run.
//     Measured: took x W^T from 0.95-1.08x to 1.01-1.10x cuBLAS.
//   - GELU / GELU' (4 warpgroups: see "the epilogue warpgroup"): each consumer stages its finished 64 x 192
//     half (+ bias) in shared memory and goes on with the next tile; a fourth warpgroup, which issues no
//     wgmma, finishes it box by box (GELU and gelu', or the product with the saved gelu', the column sums
//     of GELU') and TMA-stores it.
//   - fp32 outputs (weight gradients) are written from registers after their tile, atomically added
//     when K is split. A stream-K alternative (one wave of equal contiguous K ranges, an MLP's two weight
//     gradients per launch) measured no faster on the H200 (dW 1.03x / 1.01x of split-K at C = 768, 0.88x /
//     0.85x at C = 1024; bench/RESULTS.md session 5) and was removed (git show
//     466c0a1:tk_kernels/families/mlp/csrc/gemm.cu, with dev/hopper/check_mlp_dw.py).
//   - A's column sums (dx = dy W and GELU', A = dy K-major: the linear op's db and the MLP's db_proj, the bias
//     gradients of layers whose output gradient is A): the consumers add up the A slices they already have in the
//     ring, 64 rows a consumer, each column tile every tiles_n-th K slice, into fp32 sums per 64-row block; a short
//     launch adds the blocks (colsum.cu). Before, the column-sum kernel read all of dy again (32 MB at (16384, 1024)
//     bf16) in two launches. Measured (H100, session 49, dev/mlp_epilogue_ncu.py --sums --a-sums, us, C = 768 / 1024):
//     GELU' GEMM 149.0 -> 150.2 / 245.8 -> 250.2 with the sums, dx GEMM 110.4 -> 113.3 / 194.7 -> 191.3, while the
//     pass they replace drops from 20.3 / 23.8 (column_sums of dy) to 5.7 / 6.4 (of the block sums); bench_mlp's
//     fwd+bwd (with the 16-bit biases read as they are), four alternated pairs: 0.806 -> 0.800, 1.342 -> 1.338,
//     5.179 -> 5.148 ms at C = 768 / 1024 / 2048 (means; within the pairs' spread at 768).
//   - the producer runs ahead into the next work unit, so the loads of one tile overlap the end of the
//     one before.
//   - the 16-bit GEMMs run as clusters of 2 CTAs on the tiles (2m, n) and (2m + 1, n): each CTA loads its own A
//     and half of the common B tile, multicast into both, and frees each ring slot in both (tk::pipeline's
//     CLUSTER). A slice then reads 28 KB from L2 per CTA instead of 40 (GELU kernels) and 32 instead of 48
//     (plain). Why: session 22's stall samples put the GELU' kernel's consumers on ring full barriers ~44% of
//     their time, and its L2 traffic (operands by TMA + gelu' + dh, ~7.5 TB/s on an H100) at the plain GEMM's.
//     Measured (H100, session 23, same call, two alternations): GELU' 157.7 / 158.0 -> 150.9 / 150.9 us, plain
//     x W^T 120.7 / 119.3 -> 117.7 / 118.6, plain dy W 114.5 / 116.4 -> 112.3 / 114.1, GELU 174 -> 173 at (16384,
//     3072, 768); x W^T at 8192^3 591 -> 703 TFLOP/s (cuBLAS 679); outputs bitwise unchanged.
// Work units: tiles of 128 x 256 (GELU / GELU': 128 x 192; n fastest: neighbouring CTAs share A's rows); for
// weight gradients (M x N = C x 4C, only 72 tiles at C = 768 for 132 SMs) K is split so that the units fill
// whole waves (gemm_splits), split-major so that CTAs running together read the same K rows (they fit in L2).
// Shared memory: 4 x 48 KB ring + 2 consumers x 2 x 8 KB staging + 1 KB alignment = 225 KB; GELU / GELU':
// 4 x 40 KB ring + 2 consumers x (24 KB tile + 2 KB column sums) + 1 KB + the hand-off (1.5 KB of bias) = 214 KB.
// Measured (H200, bf16, bench/bench_mlp.py, bench/RESULTS.md): x W^T 0.96x cuBLAS at 8192^3 and 1.01-1.10x at
// the GPT-2 shapes; dy W 1.01-1.06x; dy^T x (split K, fp32 atomics) 0.84-0.93x. GELU / GELU' at (16384, 3072,
// 768) (dev/mlp_epilogue_ncu.py, H100, session 22): 175 / 157 us against 170 / 190 for the version before
// (consumers finishing their own tile in 8 pieces between the next tile's slices) and 121 / 117 for the plain
// store of the same products; bench_mlp's MLP fwd+bwd 1.136x / 1.063x / 1.019x the faster of eager and
// torch.compile at C = 768 / 1024 / 2048 (that version: 1.080x / 1.046x / 0.982x, same call); with the cluster
// pairs 1.153x / 1.089x / 1.027x (H100, session 23). Session 43 (H100): the epilogue warpgroup sets the GELU GEMM's
// pace (88% busy at 0.29 instructions a cycle; the gelu' store ~26 us and the GELU math ~25-34 us of its 54-67 us over
// the plain store, bench/RESULTS.md); fewer instructions in its box loop (AuxChunks; gelu.cuh's folded constants: 760 ->
// 658 a box) took GELU 175 -> 164 us / 278 -> 269 us and GELU' 152.6 -> 147.2 / 249.2 -> 244.3 us at C = 768 / 1024,
// the MLP fwd+bwd -1.8% / -2.0% / -0.5% at C = 768 / 1024 / 2048, GPT-2 medium's tk step 80.17 -> 79.76 ms.
#include <algorithm>
#include <string>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "host/splits.cuh"
#include "host/tensor_map.cuh"
#include "pipeline/producer_consumer.cuh"
#include "thread/bulk.cuh"
#include "thread/cluster.cuh"
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
constexpr int GBN = 192;                         // the GELU kernels' tile width (see "the epilogue warpgroup")
constexpr int A_BYTES = BM * BK * 2;
constexpr int TILE_BYTES = 64 * GBN * 2;         // one consumer's 64 x 192 16-bit staged tile (3 boxes): 24 KB
constexpr int SUM_BYTES = 2 * 4 * BOX * 4;       // GELU' column sums: 2 boxes x 4 warps x 64 fp32
// The GELU epilogues stage their whole 128 x 192 tile in shared memory for the epilogue warpgroup (see "staged
// epilogues" below): 2 x (24 KB + 2 KB of column sums). The others stage 2 x 2 store boxes. Every ring has 4 stages.
constexpr bool staged(Epilogue E) { return E == Epilogue::gelu || E == Epilogue::dgelu; }
// Warpgroups: a producer, two consumers and, for the staged (GELU) epilogues, an epilogue warpgroup (see "the
// epilogue warpgroup" below).
constexpr int threads(Epilogue E) { return staged(E) ? 512 : 384; }
constexpr int STAGES = 4;
constexpr int bn(Epilogue E) { return staged(E) ? GBN : BN; }  // tile width
// CTAs per cluster: the 16-bit GEMMs run as pairs of CTAs on the tiles (2m, n) and (2m + 1, n), each loading half
// of their common B tile into both (TMA multicast, load_slice); the weight gradients (split K) alone.
constexpr int cluster(Epilogue E) { return E == Epilogue::store_f32 ? 1 : 2; }
constexpr int epilogue_bytes(Epilogue E) { return 2 * (staged(E) ? TILE_BYTES + SUM_BYTES : 2 * BOX_BYTES); }

struct Shape {
  int M, N, K;
  int tiles_n, tiles, k_tiles, splits;  // tiles: the cluster's tiles (pairs of 128-row tiles with CLUSTER = 2)
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

// The work unit u of the CTA of rank `rank` in its cluster of CL: its tile's first row and column, and its range of
// K slices. A cluster's units are CL tiles one above the other (rows CL m + rank of 128-row tiles); with an odd
// number of 128-row tiles the last cluster unit's second tile lies below M: it is computed on TMA's zeros and its
// stores are dropped (every store is bounds-checked), so that both CTAs take the same slots.
struct Unit {
  int m0, n0, k_begin, k_end;
};
template <int BNT, int CL>
__device__ __forceinline__ Unit unit(const Shape &s, int u, int rank) {
  const int tile = u % s.tiles, split = u / s.tiles;
  return {((tile / s.tiles_n) * CL + rank) * BM, (tile % s.tiles_n) * BNT, split * s.k_tiles / s.splits,
          (split + 1) * s.k_tiles / s.splits};
}

// ------------------------------------------------------------------------------------------------
// the ring (tk::pipeline owns its barriers and phases): one stage is one K slice of both operands

template <int BNT>
struct alignas(1024) Stage {
  char a[A_BYTES];         // 128 x 64 of A: one K-major box, or 2 MN-major [64 K rows x 64] boxes side by side
  char b[BNT * BK * 2];    // BNT x 64 of B: one K-major box, or BNT / 64 MN-major boxes
};
template <int BNT> using Slot = tk::pipeline::slot<Stage<BNT>>;

// A cluster pair's MN-major B tile of an odd number of 64-column boxes is split along K (see load_slice)
template <int BNT, int CL>
constexpr bool split_b_by_k() { return CL == 2 && (BNT / BOX) % 2 == 1; }

// producer: the TMA loads of K slice kt of the tile (m0, n0) into a ring slot. A is this CTA's own; with CL = 2 the
// B tile is the pair's: this CTA loads its half into the same slot of both CTAs. K-major: rows rank * BNT / 2 .. of
// the tile, one box of BNT / 2 rows. MN-major: the 64-column boxes j with j % 2 == rank, or, for an odd number of
// boxes (the 192-wide tile), K rows 32 rank .. + 31 of every box (boxes of 32 K rows: 12 KB a CTA, not 16 / 8).
template <Major AM, Major BMJ, int BNT, int CL>
__device__ __forceinline__ void load_slice(const Slot<BNT> &s, const CUtensorMap &a_map, const CUtensorMap &b_map, int m0,
                                           int n0, int kt) {
  if constexpr (AM == Major::K) tk::tma::load_async(s.tiles.a, a_map, s.full(), kt * BK, m0);
  else
    for (int j = 0; j < BM / BOX; j++) tk::tma::load_async(s.tiles.a + j * BOX_BYTES, a_map, s.full(), m0 + j * BOX, kt * BK);
  if constexpr (CL == 1) {
    if constexpr (BMJ == Major::K) tk::tma::load_async(s.tiles.b, b_map, s.full(), kt * BK, n0);
    else
      for (int j = 0; j < BNT / BOX; j++) tk::tma::load_async(s.tiles.b + j * BOX_BYTES, b_map, s.full(), n0 + j * BOX, kt * BK);
  } else {
    static_assert(CL == 2, "load_slice: clusters of 1 or 2 CTAs");
    const int rank = tk::cluster_rank();
    constexpr uint16_t BOTH = 0b11;
    if constexpr (BMJ == Major::K) {
      const int half = rank * (BNT / 2);
      tk::tma::load_async_multicast(s.tiles.b + half * BK * 2, b_map, s.full(), kt * BK, n0 + half, BOTH);
    } else if constexpr (split_b_by_k<BNT, CL>()) {  // a 32-row box at row 32 rank of each: 4 KB, 1024-aligned
      for (int j = 0; j < BNT / BOX; j++)
        tk::tma::load_async_multicast(s.tiles.b + j * BOX_BYTES + rank * BOX_BYTES / 2, b_map, s.full(), n0 + j * BOX,
                                      kt * BK + rank * BK / 2, BOTH);
    } else {
      for (int j = rank; j < BNT / BOX; j += 2)
        tk::tma::load_async_multicast(s.tiles.b + j * BOX_BYTES, b_map, s.full(), n0 + j * BOX, kt * BK, BOTH);
    }
  }
}

// consumer: one K slice of the tile (this warpgroup's 64 rows), issued as one wgmma group; `first`
// starts the accumulator from zero. The group stays in flight: retire() (mma_wait<1>) lets the
// pipeline free the slot before it, drain() (mma_wait<0>) the last one.
template <typename T, Major AM, Major BMJ, int BNT>
__device__ __forceinline__ void mma_slice(tk::wg::accumulator<BNT> &acc, int consumer, const Stage<BNT> &st, bool first) {
  tk::wg::mma_fence(acc.v);
  const uint64_t da = AM == Major::K ? tk::wg::desc_k128(st.a + consumer * 64 * BK * 2)
                                     : tk::wg::desc_mn128(st.a + consumer * BOX_BYTES, BOX_BYTES);
  const uint64_t db = BMJ == Major::K ? tk::wg::desc_k128(st.b) : tk::wg::desc_mn128(st.b, BOX_BYTES);
#pragma unroll
  for (int k = 0; k < BK / 16; k++) {
    const uint64_t dak = AM == Major::K ? tk::wg::desc_advance_k(da, k) : tk::wg::desc_advance_k_mn(da, k);
    const uint64_t dbk = BMJ == Major::K ? tk::wg::desc_advance_k(db, k) : tk::wg::desc_advance_k_mn(db, k);
    tk::wg::wgmma_ss<T, BNT, BMJ == Major::MN, AM == Major::MN>(acc.v, dak, dbk, !first || k > 0);
  }
  tk::wg::mma_commit();
}

// ------------------------------------------------------------------------------------------------
// epilogues

struct EpiArgs {
  const void *bias;  // (N,) fp32, or in the operands' dtype T when bias16; nullptr: none
  bool bias16;
  void *aux;         // gelu: gelu'(pre) out; dgelu: gelu'(pre) in; (M, N), row stride ldc
  float *c32;        // store_f32: fp32 output (M, N), row stride ldc
  int64_t ldc;
  float *colsum;     // dgelu: column sums of C per 64-row block ((M + 63) / 64, N), or nullptr
  float *a_colsum;   // A_SUMS: column sums of A per 64-row block ((M + 63) / 64, K)
  bool tanh_gelu;
  bool atomic;       // store_f32 with split K
};

// bias[col] in fp32 from an fp32 or a T bias (a 16-bit bias, bench_mlp's and any bf16 model's, is read as it is: no
// cast launch before the GEMM; widening is exact, so the sums are bitwise those of its fp32 cast)
template <typename T>
__device__ __forceinline__ float bias_at(const EpiArgs &e, int col) {
  return e.bias16 ? float(static_cast<const T *>(e.bias)[col]) : static_cast<const float *>(e.bias)[col];
}

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

// BIAS: 0 none, 1 fp32, 2 in T (the three are separate unrolled loops: no per-pair test of the bias's presence or
// type in the hot plain store)
template <typename T, int BIAS>
__device__ __forceinline__ void round_pairs(Pending<T> &pend, const tk::wg::accumulator<BN> &acc, const Unit &w,
                                            const Shape &s, const void *bias) {
  using V = vec2<T>;
#pragma unroll
  for (int i = 0; i < acc.REGS; i += 2) {
    float x0 = acc.v[i], x1 = acc.v[i + 1];
    const int col = w.n0 + acc.col(i);
    if (BIAS != 0 && col < s.N) {
      const float2 b = BIAS == 1 ? *reinterpret_cast<const float2 *>(static_cast<const float *>(bias) + col)
                                 : V::unpack(*reinterpret_cast<const typename V::type *>(static_cast<const T *>(bias) + col));
      x0 += b.x;
      x1 += b.y;
    }
    pend.word[i / 2] = to_word(V::pack(x0, x1));
  }
}

template <typename T>
__device__ __forceinline__ void round_into(Pending<T> &pend, const tk::wg::accumulator<BN> &acc, const Unit &w,
                                           const Shape &s, const EpiArgs &e) {
  if (e.bias == nullptr) round_pairs<T, 0>(pend, acc, w, s, nullptr);
  else if (e.bias16) round_pairs<T, 2>(pend, acc, w, s, e.bias);
  else round_pairs<T, 1>(pend, acc, w, s, e.bias);
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
// staged epilogues (GELU, GELU'): the finished tile goes to shared memory, where the epilogue warpgroup reads it
//
// Keeping a pending GELU tile in registers (as the plain store does) needs compile-time register indices, so its 8
// pieces, each with 16 inlined GELU evaluations, were unrolled: 250-320 KB of SASS per kernel streamed through
// the instruction caches every tile (GELU 0.58x and GELU' 0.42x of cuBLAS + a separate PyTorch elementwise
// kernel, session 4). Staged in 128B-swizzled 64 x 64 boxes (the TMA store's layout), a tile is read back in
// 16-byte chunks by runtime index: one loop body serves every box. Until session 22 the consumers ran those chunks
// themselves, in 8 pieces between the next tile's slices (GELU 170 us, GELU' 190 us at (16384, 3072, 768), H100):
// the pieces took ~37% of the consumers' time, latency-bound, and the tensor pipe waited behind them.

// byte offset of 16-byte chunk `chunk` (0..7) of row r in a 128B-swizzled 64 x 64 box
__device__ __forceinline__ int chunk_offset(int r, int chunk) { return r * 128 + ((chunk ^ (r & 7)) << 4); }

// The finished tile (+ bias) rounded into the consumer's 3 staging boxes: per 16 columns one stmatrix.x4 per warp
// (to_a_fragment's packing is the accumulator's own order), 12 a thread instead of 48 32-bit stores.
template <typename T, Epilogue E>
__device__ __forceinline__ void stage_tile(char *tile, const tk::wg::accumulator<GBN> &acc, const float *bias) {
#pragma unroll
  for (int k = 0; k < GBN / 16; k++) {  // columns 16k .. 16k + 15: v[8k .. 8k + 7]
    tk::wg::a_fragment<T> frag;
#pragma unroll
    for (int q = 0; q < 4; q++) {
      const int i = 8 * k + 2 * q;
      const float2 b = E == Epilogue::gelu ? *reinterpret_cast<const float2 *>(bias + acc.col(i)) : make_float2(0.f, 0.f);
      frag.r[q] = tk::wg::pack2<T>(acc.v[i] + b.x, acc.v[i + 1] + b.y);
    }
    tk::wg::store_a_fragment(tile + (k / 4) * BOX_BYTES, frag, k % 4);
  }
}

// ------------------------------------------------------------------------------------------------
// the kernel: a tk::pipeline description (pipeline/producer_consumer.cuh), read top to bottom

struct GemmGlobals {
  const CUtensorMap &a_map, &b_map, &c_map;
  const Shape &s;
  const EpiArgs &e;
};

// The persistent walk: cluster c (of gridDim.x / CL) takes work units c, c + gridDim.x / CL, ...; each of its CTAs
// the tile of its rank
template <int BNT, int CL>
struct UnitWalk {
  const Shape &s;
  int u;
  const int rank;
  __device__ UnitWalk(const GemmGlobals &g) : s(g.s), u(blockIdx.x / CL), rank(CL > 1 ? tk::cluster_rank() : 0) {}
  __device__ bool next(Unit &w) {
    if (u >= s.tiles * s.splits) return false;
    w = unit<BNT, CL>(s, u, rank);
    u += gridDim.x / CL;
    return true;
  }
};

// ------------------------------------------------------------------------------------------------
// the epilogue warpgroup (GELU, GELU'): a fourth warpgroup finishes each staged tile while the consumers run the
// next tile's mainloop, as the plain store's does (no pieces between its slices)
//
// Session 21's stall samples of the piece version: its consumers spent ~37% of their time in the pieces,
// latency-bound (~0.25 instructions a cycle a warp, the two consumers' warps of a scheduler competing), and the
// tensor pipe waited behind them (GELU 169 us, GELU' 186 us against 120 / 117 us for the plain store at
// (16384, 3072, 768) on an H100). Here the consumers stage a finished tile (64 rows each, the same 128B-swizzled
// boxes) and hand it over through a full / empty mbarrier pair per consumer; the epilogue warpgroup, whose warps
// issue no wgmma, finishes it box by box with 32 values in flight a thread and frees the buffer. ptxas compiles
// every warpgroup's code within the launch's 128 registers a thread (setmaxnreg does not raise that cap: the
// m64n256 wgmma asks for 154), so these kernels use 128 x 192 tiles (m64n192: 96 accumulator registers), a 4-stage
// ring of 40 KB slots and 2 x 24 KB staging buffers. Budget: 192 values a thread a tile (~3,600 instructions a
// warp) against ~13,000 cycles of tensor work a tile at the plain store's rate. The GELU kernel's bias reaches the
// consumers through shared memory (the epilogue warpgroup writes tile t + 1's while they compute it): loaded into
// registers beside the 96 accumulators, ptxas spilled. The consumers stage with stmatrix (12 a thread; 48 32-bit
// stores measured 2-3 us slower on GELU).
// The backward needs gelu'(pre), not pre: the GELU epilogue computes it beside gelu (it shares Phi and exp(-x^2 / 2))
// and writes it from registers, 8 threads a 128-byte line, so GELU' only multiplies (no erf in the backward).
// Measured at (16384, 3072, 768), H100, session 22 (dev/mlp_epilogue_ncu.py, us), against the piece version:
//   this design writing pre (s22a / s22b): GELU 166 / 164, GELU' 180 / 180 (piece version 170 / 190)
//   + gelu'(pre) saved: GELU 180 / 177 (the epilogue warpgroup is the slower side: the consumers wait for its
//     buffer in 8% of the samples, 4% before), GELU' 157 / 159; + stmatrix staging (this file): 176 / 175, 157 / 157
//   plain store of the same products: 121, 117. GPT-2 124M step (bench_train, graphs; gelu' saved, without
//   stmatrix): 33.07 -> 32.62 ms.

constexpr int EPI_BAR = 3;  // the epilogue warpgroup's named barrier (the consumers use 1 and 2)

// consumer c's staged tile: full (its 128 threads staged a tile), empty (the epilogue warpgroup's 128 threads are
// done with it, its TMA stores' reads included). Every thread arrives for its own writes: one thread arriving after a
// named barrier is correct in the PTX memory model, but racecheck reported it as 11 hazards per run (s22a).
struct TileHandoff {
  tk::barrier full[2], empty[2];
  tk::barrier bias0;      // GELU: the first tile's bias is in bias[0]
  float bias[2][GBN];     // GELU: tile t's bias (0 past N) in bias[t % 2], written by the epilogue warpgroup
};
__device__ __forceinline__ TileHandoff &tile_handoff() {
  __shared__ TileHandoff h;
  return h;
}

// This thread's 16-byte chunks of gelu'(pre) in consumer c's half of tile w: rows r0 + 16 j (j = 0..3), columns
// 8 q .. 8 q + 7 of box b, in the (M, N) matrix `aux` (N is a multiple of 8, so a chunk is all in or all out). The
// 64-bit address of the first row is formed once per half, a chunk is a 32-bit offset from it and its bounds test two
// compares (session 43: a 64-bit product, a null test and a branch per chunk were ~60 of the GELU box loop's 760
// instructions, in an epilogue warpgroup that sets the kernel's pace).
template <typename T>
struct AuxChunks {
  T *first;        // row w.m0 + 64 c + r0, column w.n0 + 8 q (an address past the matrix is never dereferenced)
  int ldc16;       // 16 rows, in elements
  int rows, cols;  // rows and columns of the matrix from there on (<= 0: none)
  __device__ AuxChunks(const Unit &w, int c, int r0, int q, const Shape &s, const EpiArgs &e)
      : first(static_cast<T *>(e.aux) + int64_t(w.m0 + c * 64 + r0) * e.ldc + (w.n0 + q * 8)),
        ldc16(int(16 * e.ldc)), rows(s.M - (w.m0 + c * 64 + r0)), cols(s.N - (w.n0 + q * 8)) {}
  __device__ bool in(int b, int j) const { return 16 * j < rows && b * BOX < cols; }
  __device__ uint4 *at(int b, int j) const { return reinterpret_cast<uint4 *>(first + (j * ldc16 + b * BOX)); }
  // GELU': the forward's gelu'(pre) (zero outside the matrix)
  __device__ uint4 load(int b, int j) const { return in(b, j) ? *at(b, j) : make_uint4(0u, 0u, 0u, 0u); }
};

// One 16-byte chunk (8 values) of a staged box, in place. GELU: the chunk of pre-activations becomes gelu(pre), and
// `aux` receives gelu'(pre), rounded like it. GELU': the gradient times `aux` (the forward's gelu'(pre)), whose
// rounded outputs are added to this thread's 8 column sums (as a sum of the stored C would).
template <typename T, Epilogue E, bool TANH>
__device__ __forceinline__ uint4 finish_chunk(const uint4 &v, uint4 &aux, float (&cs)[8]) {
  using V = vec2<T>;
  uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t a[4] = {aux.x, aux.y, aux.z, aux.w};
#pragma unroll
  for (int k = 0; k < 4; k++) {
    const float2 x = V::unpack_word(w[k]);
    if constexpr (E == Epilogue::gelu) {
      float d0, d1;
      const float g0 = gelu_and_grad(x.x, TANH, d0), g1 = gelu_and_grad(x.y, TANH, d1);
      w[k] = to_word(V::pack(g0, g1));
      a[k] = to_word(V::pack(d0, d1));
    } else {
      const float2 d = V::unpack_word(a[k]);
      w[k] = to_word(V::pack(x.x * d.x, x.y * d.y));
      const float2 y = V::unpack_word(w[k]);
      cs[2 * k] += y.x;
      cs[2 * k + 1] += y.y;
    }
  }
  if constexpr (E == Epilogue::gelu) aux = make_uint4(a[0], a[1], a[2], a[3]);
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Consumer c's staged 64 x 192 half of tile w, box by box: thread `me` takes chunk me % 8 of rows me / 8 + 16 j,
// j = 0 .. 3 (8 threads read one 128-byte row: no bank conflicts; 8 threads write or read one 128-byte line of
// gelu'(pre) in memory, GELU' a box ahead). All four chunks are read before any is written back: 32 values in
// flight. After a box, one thread TMA-stores it; GELU' then writes the box's column sums over the 64 rows (per thread
// over its 4 rows, per warp by two shuffles, over the 4 warps through `sums`, double-buffered by box; one plain store
// per column into the 64-row block's row of colsum: each element written once, no zeroing, no atomics).
// GELU': `next` holds box 0's chunks of gelu'(pre) on entry and the next half's (nw, nc; has_next) on return, so
// that no half starts with a load from memory.
template <typename T, Epilogue E, bool TANH>
__device__ __forceinline__ void finish_half(char *tile, const Unit &w, int c, int me, const GemmGlobals &g,
                                            uint4 (&next)[4], const Unit &nw, int nc, bool has_next) {
  const Shape &s = g.s;
  const EpiArgs &e = g.e;
  const int q = me % 8, r0 = me / 8;
  float *sums = reinterpret_cast<float *>(tile + TILE_BYTES);  // [box % 2][warp][64]
  const AuxChunks<T> ax(w, c, r0, q, s, e);
  uint4 aux[4] = {};
#pragma unroll 1
  for (int b = 0; b < GBN / BOX; b++) {
    char *box = tile + b * BOX_BYTES;
    if constexpr (E == Epilogue::dgelu) {
#pragma unroll
      for (int j = 0; j < 4; j++) aux[j] = next[j];
      if (b + 1 < GBN / BOX) {
#pragma unroll
        for (int j = 0; j < 4; j++) next[j] = ax.load(b + 1, j);
      } else if (has_next) {
        const AuxChunks<T> nx(nw, nc, r0, q, s, e);
#pragma unroll
        for (int j = 0; j < 4; j++) next[j] = nx.load(0, j);
      }
    }
    float cs[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
    uint4 *p[4];
    uint4 v[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
      p[j] = reinterpret_cast<uint4 *>(box + chunk_offset(r0 + 16 * j, q));
      v[j] = *p[j];
    }
#pragma unroll
    for (int j = 0; j < 4; j++) v[j] = finish_chunk<T, E, TANH>(v[j], aux[j], cs);
#pragma unroll
    for (int j = 0; j < 4; j++) *p[j] = v[j];
    if constexpr (E == Epilogue::gelu) {  // gelu'(pre) straight to memory: 8 threads write one 128-byte line
#pragma unroll
      for (int j = 0; j < 4; j++)
        if (ax.in(b, j)) *ax.at(b, j) = aux[j];
    }
    const bool sum = E == Epilogue::dgelu && e.colsum != nullptr;
    if (sum) {
#pragma unroll
      for (int k = 0; k < 8; k++) {  // lanes l, l ^ 8, l ^ 16, l ^ 24 hold the same 8 columns
        cs[k] += __shfl_xor_sync(0xffffffffu, cs[k], 8);
        cs[k] += __shfl_xor_sync(0xffffffffu, cs[k], 16);
      }
      if (me % 32 < 8) {
        float4 *d = reinterpret_cast<float4 *>(sums + ((b % 2) * 4 + me / 32) * BOX + q * 8);
        d[0] = make_float4(cs[0], cs[1], cs[2], cs[3]);
        d[1] = make_float4(cs[4], cs[5], cs[6], cs[7]);
      }
    }
    tk::fence_proxy_async_shared();
    tk::wg::named_sync(EPI_BAR, tk::wg::WARPGROUP_THREADS);
    if (me == 0) {
      tk::tma::store_async(g.c_map, box, w.n0 + b * BOX, w.m0 + c * 64);
      tk::bulk_commit_group();
    }
    const int col = w.n0 + b * BOX + me;
    if (sum && me < BOX && col < s.N && w.m0 + c * 64 < s.M) {
      const float *ps = sums + (b % 2) * 4 * BOX + me;
      e.colsum[int64_t(w.m0 / 64 + c) * s.N + col] = ((ps[0] + ps[BOX]) + ps[2 * BOX]) + ps[3 * BOX];
    }
  }
}

template <typename T, Epilogue E>
struct GemmEpilogue {
  const GemmGlobals &g;
  const int me;
  char *scratch;  // the consumers' tile buffers, epilogue_bytes(E) / 2 each

  __device__ GemmEpilogue(const GemmGlobals &g, const tk::pipeline::epilogue_ctx &ctx)
      : g(g), me(tk::wg::warpgroup_thread()), scratch(ctx.scratch) {}

  // GELU: tile w's bias, 0 past N, into dst (read by the consumers' staging)
  __device__ void write_bias(float *dst, const Unit &w) {
    for (int i = me; i < GBN; i += tk::wg::WARPGROUP_THREADS)
      dst[i] = g.e.bias != nullptr && w.n0 + i < g.s.N ? bias_at<T>(g.e, w.n0 + i) : 0.f;
  }

  template <typename Walk>
  __device__ void run(Walk &walk) {
    TileHandoff &h = tile_handoff();
    Unit w;
    bool more = walk.next(w);
    uint4 next_aux[4] = {};  // GELU': the chunks of gelu'(pre) for the next half's box 0
    if constexpr (E == Epilogue::dgelu) {
      const int q = me % 8, r0 = me / 8;
      if (more) {
        const AuxChunks<T> first(w, 0, r0, q, g.s, g.e);
#pragma unroll
        for (int j = 0; j < 4; j++) next_aux[j] = first.load(0, j);
      }
    }
    if constexpr (E == Epilogue::gelu) {  // the first tile's bias, before the consumers stage it
      if (more) write_bias(h.bias[0], w);
      tk::arrive(h.bias0);  // each thread releases its own writes
    }
#pragma unroll 1
    for (int t = 0; more; t++) {
      Unit next;
      const bool ahead = walk.next(next);
      tk::wait(h.full[0], t & 1);
      tk::wait(h.full[1], t & 1);
      // GELU: the next tile's bias, now that both consumers have staged this one (and read this tile's bias). They
      // read it after waiting for this tile's empty barriers, which are arrived after the named barriers below.
      if (E == Epilogue::gelu && ahead) write_bias(h.bias[(t + 1) & 1], next);
#pragma unroll 1
      for (int c = 0; c < 2; c++) {
        char *tile = scratch + c * (epilogue_bytes(E) / 2);
        const Unit nw = c == 0 ? w : next;  // the half after this one (a copy: a reference to either spilled both)
        const bool has_next = c == 0 || ahead;
        if (E == Epilogue::gelu && g.e.tanh_gelu) finish_half<T, E, true>(tile, w, c, me, g, next_aux, nw, 1 - c, has_next);
        else finish_half<T, E, false>(tile, w, c, me, g, next_aux, nw, 1 - c, has_next);
        // each thread releases its own writes; thread 0, which issued the TMA stores, once they have read the buffer
        if (me == 0) tk::bulk_wait_group_read<0>();
        tk::arrive(h.empty[c]);
      }
      w = next;
      more = ahead;
    }
    if (me == 0) tk::bulk_wait_group<0>();
  }
};

// One consumer warpgroup: its 64 rows of every tile, accumulated slice by slice, then the epilogue E. The plain
// 16-bit store is deferred: the pipeline runs a finished tile's PIECES pieces while the next tile's first slices
// are in flight (unrolled for the register-held pending tile). GELU, GELU': the tile is staged for the epilogue
// warpgroup; fp32: stored from registers.
//
// A_SUMS (dx = dy W and GELU''s (dy W_proj) * gelu'(pre): A K-major, B MN-major): the consumers also add up A's
// columns over their 64 rows, the bias gradient of the layer whose output gradient A is, read from the ring slots the
// wgmmas read anyway instead of in a pass over A of its own. Each of a row block's column tiles sums its share of the
// K slices (tile n: slices n, n + tiles_n, ...), so the extra work is spread evenly over the tiles and every element
// of a_colsum is written once, by one lane, in a fixed order of additions (bitwise reproducible, no zeroing). An
// instantiation of its own: the GEMMs without it keep their code.
template <typename T, Major AM, Major BMJ, Epilogue E, bool A_SUMS = false>
struct GemmConsumer {
  static_assert(!A_SUMS || ((E == Epilogue::store || E == Epilogue::dgelu) && AM == Major::K && BMJ == Major::MN),
                "GemmConsumer: A's column sums in the dx = dy W (store) and GELU' GEMMs only");
  static constexpr int DEFERRED_PIECES = E == Epilogue::store ? PIECES : 0;  // GELU, GELU': the epilogue warpgroup
  static constexpr bool UNROLL_PIECES = E == Epilogue::store;
  const GemmGlobals &g;
  const int id;
  char *epi;                    // this consumer's half of the epilogue buffers (scratch after the ring)
  tk::wg::accumulator<bn(E)> acc;
  Pending<T> pend;              // store: the tile waiting for its pieces
  int stores = 0;               // store: TMA stores issued (staging buffer parity)
  int staged_tiles = 0;         // GELU, GELU': tiles handed to the epilogue warpgroup
  float *a_sums = nullptr;      // A_SUMS: this consumer's row of a_colsum for the tile, or null (it sums no slice)
  int sum_slice = 0;            // A_SUMS: the next of the tile's K slices (counted from its first) whose columns it sums
  int k_first = 0;              // A_SUMS: the tile's first K slice

  __device__ GemmConsumer(const GemmGlobals &g, const tk::pipeline::consumer_ctx<> &ctx)
      : g(g), id(ctx.id), epi(ctx.scratch + ctx.id * (epilogue_bytes(E) / 2)) {}

  // (only with A_SUMS: the pipeline calls start(work) before each tile's first slot when the consumer has it)
  __device__ void start(const Unit &w) requires A_SUMS {
    const int tile_n = w.n0 / bn(E), rows = w.m0 + id * 64;
    a_sums = rows < g.s.M && tile_n < w.k_end - w.k_begin ? g.e.a_colsum + int64_t(rows / 64) * g.s.K : nullptr;
    sum_slice = tile_n;
    k_first = w.k_begin;
  }

  __device__ void compute(const Slot<bn(E)> &s, int i) {
    mma_slice<T, AM, BMJ, bn(E)>(acc, id, s.tiles, i == 0);
    if constexpr (A_SUMS) {
      if (a_sums != nullptr && i == sum_slice) {  // while the slice's wgmmas run
        a_column_sums(s.tiles.a, k_first + i);
        sum_slice += g.s.tiles_n;
      }
    }
  }

  // A's column sums over this consumer's 64 rows of K slice kt (columns 64 kt .. of a_sums' row). Warp w
  // takes the 16 columns 16 w .., lane l the pair 16 w + 2 (l % 8) in rows 2 (l / 8) + h + 8 j (h = 0, 1, j = 0 .. 7):
  // the four rows one load instruction reads have different r % 8, so after the 128B swizzle (16-byte chunk c of row
  // r at c ^ (r % 8)) their 32-byte pieces lie in different banks. Two shuffles add the four row groups; lanes 0 .. 7
  // store the warp's 16 sums (rows >= M are TMA's zeros; columns >= K are not stored).
  __device__ void a_column_sums(const char *a_tile, int kt) const {
    const int me = tk::wg::warpgroup_thread(), lane = me % 32, warp = me / 32;
    const char *rows = a_tile + id * 64 * (BK * 2);
    const int chunk = 2 * warp + (lane % 8) / 4, word = (lane % 4) * 4;
    int at[2];  // byte offsets of this lane's pair in its rows 2 (l / 8) + h, h = 0, 1 (r % 8 is the same 8 rows on)
#pragma unroll
    for (int h = 0; h < 2; h++) at[h] = chunk_offset(2 * (lane / 8) + h, chunk) + word;
    float s0 = 0.f, s1 = 0.f;
#pragma unroll
    for (int j = 0; j < 16; j++) {
      const uint32_t u = *reinterpret_cast<const uint32_t *>(rows + (j / 2) * 8 * (BK * 2) + at[j % 2]);
      const float2 x = vec2<T>::unpack_word(u);
      s0 += x.x;
      s1 += x.y;
    }
    s0 += __shfl_xor_sync(0xffffffffu, s0, 8);
    s1 += __shfl_xor_sync(0xffffffffu, s1, 8);
    s0 += __shfl_xor_sync(0xffffffffu, s0, 16);
    s1 += __shfl_xor_sync(0xffffffffu, s1, 16);
    const int col = kt * BK + 16 * warp + 2 * (lane % 8);
    if (lane < 8 && col < g.s.K) *reinterpret_cast<float2 *>(a_sums + col) = make_float2(s0, s1);
  }
  __device__ void retire() { tk::wg::mma_wait<1>(acc.v); }
  __device__ void drain() { tk::wg::mma_wait<0>(acc.v); }

  __device__ void finish(const Unit &w) {
    if constexpr (E == Epilogue::store_f32) {
      store_f32(acc, w, w.m0 + id * 64, g.s, g.e);
    } else if constexpr (E == Epilogue::store) {
      round_into<T>(pend, acc, w, g.s, g.e);
    } else {  // GELU, GELU': stage the tile for the epilogue warpgroup once it is done with the previous one
      TileHandoff &h = tile_handoff();
      tk::wait(h.empty[id], (staged_tiles & 1) ^ 1);  // the first use finds the buffer free (and tile t's bias is in)
      if (E == Epilogue::gelu && staged_tiles == 0) tk::wait(h.bias0, 0);
      stage_tile<T, E>(epi, acc, h.bias[staged_tiles & 1]);
      tk::fence_proxy_async_shared();  // the epilogue warpgroup's TMA stores read what this thread wrote
      tk::arrive(h.full[id]);
      staged_tiles++;
    }
  }

  __device__ void deferred(int piece) {
    if constexpr (E == Epilogue::store) store_piece<T>(pend, piece, id, g.c_map, epi, stores);
  }

  __device__ void last() {
    if constexpr (E == Epilogue::store) {
      if (tk::wg::warpgroup_thread() == 0) tk::bulk_wait_group<0>();
    }
  }
};

template <typename T, Major AM, Major BMJ, Epilogue E, bool A_SUMS>
struct GemmPipe {
  using globals = GemmGlobals;
  using stage = Stage<bn(E)>;
  using work = Unit;
  using scheduler = UnitWalk<bn(E), cluster(E)>;
  using consumer = GemmConsumer<T, AM, BMJ, E, A_SUMS>;
  using epilogue = std::conditional_t<staged(E), GemmEpilogue<T, E>, void>;
  static constexpr int STAGES = tk_mlp::STAGES, CONSUMERS = 2, CLUSTER = cluster(E);
  // GELU, GELU': 4 warpgroups launched at 128 registers a thread (ptxas compiles every warpgroup's code within
  // that count, setmaxnreg or not: the m64n256 wgmma needs 154, hence the 192-wide tiles), the producer gives 104
  static constexpr int PRODUCER_REGS = staged(E) ? 24 : 40, CONSUMER_REGS = staged(E) ? 128 : 232;
  static constexpr int EPILOGUE_REGS = 128;
  __device__ static void setup(const GemmGlobals &) {  // thread 0, before the CTA's barrier
    if constexpr (staged(E)) {
      TileHandoff &h = tile_handoff();
      for (int c = 0; c < 2; c++) {
        tk::init(h.full[c], tk::wg::WARPGROUP_THREADS);
        tk::init(h.empty[c], tk::wg::WARPGROUP_THREADS);
      }
      tk::init(h.bias0, tk::wg::WARPGROUP_THREADS);
      tk::fence_barrier_init();
    }
  }
  static constexpr int SCRATCH_BYTES = epilogue_bytes(E);
  __device__ static int iterations(const GemmGlobals &, const Unit &w) { return w.k_end - w.k_begin; }
  __device__ static void load(const Slot<bn(E)> &s, const GemmGlobals &g, const Unit &w, int i) {
    load_slice<AM, BMJ, bn(E), cluster(E)>(s, g.a_map, g.b_map, w.m0, w.n0, w.k_begin + i);
  }
};
template <typename T, Major AM, Major BMJ, Epilogue E, bool A_SUMS>
using GemmPipeline = tk::pipeline::kernel<GemmPipe<T, AM, BMJ, E, A_SUMS>>;

template <typename T, Major AM, Major BMJ, Epilogue E, bool A_SUMS>
__global__ void __launch_bounds__(threads(E), 1)
gemm_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
            const __grid_constant__ CUtensorMap c_map, const Shape s, const EpiArgs e) {
  GemmPipeline<T, AM, BMJ, E, A_SUMS>::run(GemmGlobals{a_map, b_map, c_map, s, e});
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

// How many clusters of `kernel` (launched as `config` says) fit on the GPU at once: a persistent grid's size. Asked
// once per kernel (a failed query is asked again next time; meanwhile #SMs / cluster size), on no stream and with
// stream capture relaxed for this thread, since the first call may come while a CUDA graph is being captured.
template <auto KERNEL>
int max_clusters(const cudaLaunchConfig_t &launch) {
  static int known = 0;  // per kernel
  const int cl = int(launch.attrs[0].val.clusterDim.x);
  if (known > 0) return known;
  cudaLaunchConfig_t config = launch;
  config.stream = nullptr;
  config.gridDim = dim3(sm_count() / cl * cl);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaThreadExchangeStreamCaptureMode(&mode);
  int n = 0;
  const cudaError_t err = cudaOccupancyMaxActiveClusters(&n, KERNEL, &config);
  cudaThreadExchangeStreamCaptureMode(&mode);  // back to the caller's mode
  if (err != cudaSuccess) {
    cudaGetLastError();  // the failed query's own error, not left for the launch's check
    return sm_count() / cl;
  }
  if (n > 0) known = n;
  return n > 0 ? n : sm_count() / cl;
}

// TMA map of an operand: K-major (rows = M or N, cols = K, box 64 x rows_per_box) or MN-major
// (rows = K, cols = M or N, box 64 x 64).
template <typename T>
CUtensorMap operand_map(const void *ptr, Major major, int mn, int K, int64_t ld, int tile_rows, int k_rows = BK) {
  if (major == Major::K) return tk::host::matrix_map<T>(ptr, mn, K, ld, tile_rows, BK, 128);
  return tk::host::matrix_map<T>(ptr, K, mn, ld, k_rows, BOX, 128);
}

template <typename T, Major AM, Major BMJ, Epilogue E, bool A_SUMS = false>
cudaError_t launch(const GemmParams &p, const Shape &s, cudaStream_t stream) {
  const CUtensorMap a_map = operand_map<T>(p.a, AM, p.M, p.K, p.lda, BM);
  constexpr int CL = cluster(E);
  // the pair's B halves: K-major a box of half the tile's rows, MN-major 64-column boxes or (odd count) 32-row ones
  const CUtensorMap b_map = operand_map<T>(p.b, BMJ, p.N, p.K, p.ldb, bn(E) / CL,
                                           split_b_by_k<bn(E), CL>() ? BK / 2 : BK);
  CUtensorMap c_map{};
  if constexpr (E != Epilogue::store_f32) c_map = tk::host::matrix_map<T>(p.c, p.M, p.N, p.ldc, 64, BOX, 128);
  const EpiArgs e{p.bias, p.bias16, p.aux, static_cast<float *>(p.c), p.ldc, p.colsum, p.a_colsum, p.tanh_gelu,
                  s.splits > 1};
  auto kernel = gemm_kernel<T, AM, BMJ, E, A_SUMS>;
  constexpr int smem = GemmPipeline<T, AM, BMJ, E, A_SUMS>::SHARED_BYTES;
  static_assert(GemmPipeline<T, AM, BMJ, E, A_SUMS>::THREADS == threads(E));
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (err != cudaSuccess) return err;
  if constexpr (CL == 1) {
    const int grid = std::min(sm_count(), s.tiles * s.splits);
    kernel<<<grid, threads(E), smem, stream>>>(a_map, b_map, c_map, s, e);
    return cudaGetLastError();
  } else {
    cudaLaunchConfig_t config{};
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = CL;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    config.blockDim = dim3(threads(E));
    config.dynamicSmemBytes = smem;
    config.stream = stream;
    config.attrs = attr;
    config.numAttrs = 1;
    config.gridDim = dim3(CL * std::min(max_clusters<gemm_kernel<T, AM, BMJ, E, A_SUMS>>(config), s.tiles * s.splits));
    return cudaLaunchKernelEx(&config, kernel, a_map, b_map, c_map, s, e);
  }
}

template <typename T>
cudaError_t dispatch(const GemmParams &p, const Shape &s, cudaStream_t stream, const char **why) {
  using M = Major;
  using E = Epilogue;
  const M a = p.a_major, b = p.b_major;
  const E epi = p.epilogue;
  if (a == M::K && b == M::K && epi == E::store) return launch<T, M::K, M::K, E::store>(p, s, stream);
  if (a == M::K && b == M::K && epi == E::gelu) return launch<T, M::K, M::K, E::gelu>(p, s, stream);
  const bool sums = p.a_colsum != nullptr;  // + A's column sums (A_SUMS)
  if (a == M::K && b == M::MN && epi == E::store)
    return sums ? launch<T, M::K, M::MN, E::store, true>(p, s, stream) : launch<T, M::K, M::MN, E::store>(p, s, stream);
  if (a == M::K && b == M::MN && epi == E::dgelu)
    return sums ? launch<T, M::K, M::MN, E::dgelu, true>(p, s, stream) : launch<T, M::K, M::MN, E::dgelu>(p, s, stream);
  if (a == M::MN && b == M::MN && epi == E::store_f32) return launch<T, M::MN, M::MN, E::store_f32>(p, s, stream);
  if (why) *why = "tk mlp gemm: unsupported combination of operand layouts and epilogue";
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
    return fail("tk mlp gemm: the GELU epilogues need the GELU-derivative buffer (aux)");
  if (p.colsum != nullptr && p.epilogue != Epilogue::dgelu)
    return fail("tk mlp gemm: only the GELU' epilogue writes column sums");
  if (p.a_colsum != nullptr && ((p.epilogue != Epilogue::store && p.epilogue != Epilogue::dgelu) ||
                                p.a_major != Major::K || p.b_major != Major::MN))
    return fail("tk mlp gemm: A's column sums need a K-major A, an MN-major B and the store or GELU' epilogue");
  const int tile_n = p.epilogue == Epilogue::gelu || p.epilogue == Epilogue::dgelu ? GBN : BN;
  const int cl = cluster(p.epilogue);
  Shape s{p.M, p.N, p.K, (p.N + tile_n - 1) / tile_n, 0, (p.K + BK - 1) / BK, 1};
  s.tiles = ((p.M + BM * cl - 1) / (BM * cl)) * s.tiles_n;
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
