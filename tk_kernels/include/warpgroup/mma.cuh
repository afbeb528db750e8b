// Warpgroup matrix multiply (Hopper wgmma, sm_90a): shared-memory matrix descriptors, the fences
// and groups that order asynchronous MMAs, register reallocation between warpgroups, and the
// layout of the fp32 accumulator a warpgroup holds.
//
// A warpgroup is 4 consecutive warps (128 threads) starting at a warp index divisible by 4.
// Operands live in shared memory in the layout TMA writes with a 128-byte swizzle: rows of 64
// 16-bit elements (128 bytes, the K extent of one tile), 8-row atoms of 1024 bytes whose 16-byte
// chunks are XOR-permuted by the row index. Tiles must start on a 1024-byte boundary.
//
//   desc_k128(tile)              descriptor of a [rows x 64] K-major 128B-swizzled tile
//   desc_advance_k(desc, k)      the same tile, starting at K element 16 k (k-th k16 slice)
//   desc_mn128(tile, panel_bytes)   descriptor of an MN-major operand: [K rows x N] with N
//                                contiguous, stored as 64-wide N panels of [K x 64] 128B-swizzled
//                                rows (what TMA writes for a box of 64 columns), panel_bytes apart
//   desc_advance_k_mn(desc, k)   the same, starting at K row 16 k
//   mma_fence(acc) / mma_commit() / mma_wait<N>(acc)
//   pin_registers(v)             v is computed here, in program order (volatile asms keep their order);
//                                float or uint32_t arrays (e.g. an a_fragment's r[] after its wgmma_rs)
//   set_max_registers<R>() grow (consumers) or shrink (producers) this warpgroup's registers
//   accumulator<N>               fp32 D[64 x N] of one warpgroup, with row/col of each value
//   a_fragment<T> / to_a_fragment(frag, acc, k)
//                                16-bit A operand (registers) of wgmma_rs for the k-th 16-column
//                                slice of an accumulator: P = softmax(S) feeds O += P V directly
//   swizzle128_offset(row, col)  byte offset of 16-bit element (row, col < 64) in a 128B-swizzled
//                                [rows x 64] tile (to stage an accumulator for a TMA store)
//   store_a_fragment(tile, frag, k)  frag (columns 16k.. of the warpgroup's 64 rows) into the 128B-swizzled
//                                [64 x 64] 16-bit shared tile at tile: one stmatrix.x4 per warp (sm_90)
//   store_tile(tile, v, panel_bytes)   the whole 64 x N accumulator v, 16-bit, into N / 64 such tiles panel_bytes
//                                apart (store_a_fragment per 16 columns): to stage it for a TMA store
//   load_a_fragment(frag, tile, k)     its inverse (ldmatrix.x4): wgmma_rs's A from a K-major shared tile
//   load_a_fragment_mn(frag, box, k)   the same A fragment from an MN-major [64 k x 64 m] box (ldmatrix.x4.trans)
//   store_rows(dst, ld, acc, scale, rows)   the accumulator times a per-row factor, as 16-bit rows of a row-major
//                                global matrix, 16 bytes a lane (a quad's words transposed first: quad_transpose)
//
// Use: fence -> N x wgmma_ss over the k16 slices -> commit; wait<0> (or <1> to keep one group in
// flight) before reading the accumulator or overwriting the operand tiles.
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include "../common/util.cuh"
#include "wgmma_ops.cuh"
#include "../warp/memory/register_to_shared.cuh"
#include "../warp/memory/shared_to_register.cuh"
#include "../thread/vec8.cuh"

namespace tk::wg {

constexpr int WARPGROUP_THREADS = 128;
constexpr int SWIZZLE128_ROW_BYTES = 128;   // one row of a K-major tile: 64 bf16/fp16
constexpr int SWIZZLE128_ATOM_BYTES = 1024; // 8 rows

__device__ __forceinline__ int warpgroupid() { return threadIdx.x / WARPGROUP_THREADS; }
__device__ __forceinline__ int warpgroup_thread() { return threadIdx.x % WARPGROUP_THREADS; }

// Matrix descriptor (PTX ISA "Matrix Descriptor Format"): start address, leading-dimension byte
// offset (unused for K-major swizzled tiles whose K slice fits in one swizzle row: 1), stride-
// dimension byte offset (from one 8-row atom to the next: 1024 B), swizzle mode 1 = 128 B.
// Addresses and offsets are stored >> 4.
__device__ __forceinline__ uint64_t desc_k128(const void *tile) {
  uint64_t addr = smem_u32(tile);
  uint64_t desc = (addr & 0x3FFFF) >> 4;
  desc |= uint64_t(1) << 16;                                   // leading-dimension byte offset
  desc |= uint64_t(SWIZZLE128_ATOM_BYTES >> 4) << 32;          // stride-dimension byte offset
  desc |= uint64_t(1) << 62;                                   // 128-byte swizzle
  return desc;
}

// Step along K inside the swizzle row: k16 slice k starts 32 k bytes further (the hardware applies
// the swizzle to the full address, so a plain offset of the start address is right).
__device__ __forceinline__ uint64_t desc_advance_k(uint64_t desc, int k) {
  return desc + uint64_t((k * 32) >> 4);
}

// 16-byte chunk c of row r lands in chunk c ^ (r % 8) (the TMA / wgmma 128-byte swizzle).
__device__ __forceinline__ int swizzle128_offset(int row, int col) {
  const int chunk = (col * 2) >> 4;
  return row * SWIZZLE128_ROW_BYTES + ((chunk ^ (row & 7)) << 4) + ((col * 2) & 15);
}

// MN-major operand (tnspB = 1 / B_MN = true in wgmma_ops.cuh), e.g. V [keys x D] as the B operand
// of O = P V, where K = keys are the rows and N = D is contiguous. In the 128B-swizzle canonical
// MN-major layout an 8-row atom holds 8 K rows of 64 N elements (1024 B); the descriptor's
// stride-dimension offset steps 8 K rows (1024 B) and its leading-dimension offset steps to the next
// 64-wide N panel (panel_bytes: rows x 128 B for a [rows x 64] TMA box; unused when N = 64).
__device__ __forceinline__ uint64_t desc_mn128(const void *tile, uint32_t panel_bytes) {
  uint64_t addr = smem_u32(tile);
  uint64_t desc = (addr & 0x3FFFF) >> 4;
  desc |= uint64_t((panel_bytes & 0x3FFFF) >> 4) << 16;       // leading-dimension byte offset
  desc |= uint64_t(SWIZZLE128_ATOM_BYTES >> 4) << 32;          // stride-dimension byte offset
  desc |= uint64_t(1) << 62;                                   // 128-byte swizzle
  return desc;
}

// Step along K (the rows) of an MN-major tile: k16 slice k starts 16 rows = 2 atoms = 2048 k bytes further.
__device__ __forceinline__ uint64_t desc_advance_k_mn(uint64_t desc, int k) {
  return desc + uint64_t((k * 2 * SWIZZLE128_ATOM_BYTES) >> 4);
}

// An empty asm that "reads and writes" every register of v: the compiler must have computed v before
// this point and may not move v's later uses above it.
template <int R>
__device__ __forceinline__ void pin_registers(float (&v)[R]) {
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+f"(v[i])::"memory");
}
// The same for 32-bit registers, e.g. the a_fragment of a wgmma_rs: pinned after the wait that retires
// the wgmma, it stays live (its registers are not handed to other values) while the wgmma reads it.
template <int R>
__device__ __forceinline__ void pin_registers(uint32_t (&v)[R]) {
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+r"(v[i])::"memory");
}

// Orders this thread's register accesses of the accumulator before the next wgmma reads them
// (wgmma.fence), and keeps the compiler from moving accumulator accesses across it.
template <int R>
__device__ __forceinline__ void mma_fence(float (&acc)[R]) {
#pragma unroll
  for (int i = 0; i < R; i++) asm volatile("" : "+f"(acc[i])::"memory");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mma_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Wait until at most N committed groups of this warpgroup are pending; acc is pinned so that the
// compiler reads it only after the wait. To keep a computation BEFORE a wait (e.g. the softmax of S
// that should overlap an in-flight P V group), pin_registers(its result) right before the wait.
template <int N, int R>
__device__ __forceinline__ void mma_wait(float (&acc)[R]) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#endif
  pin_registers(acc);
}

// setmaxnreg: every thread of the warpgroup executes it. Takes effect only in kernels compiled
// with a register cap at entry (__launch_bounds__(threads, 1)). R is a multiple of 8 in [24, 256].
template <int R>
__device__ __forceinline__ void set_max_registers() {
  static_assert(R % 8 == 0 && R >= 24 && R <= 256, "setmaxnreg takes a multiple of 8 in [24, 256]");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (R >= 128) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
  else asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
#endif
}

// The same from a known launch count: grow if R > LAUNCH, shrink if R < LAUNCH (a warpgroup whose count lies
// between the producer's and the consumers', e.g. the pipeline's epilogue warpgroup).
template <int R, int LAUNCH>
__device__ __forceinline__ void set_max_registers_from() {
  static_assert(R % 8 == 0 && R >= 24 && R <= 256, "setmaxnreg takes a multiple of 8 in [24, 256]");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  if constexpr (R > LAUNCH) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
  else if constexpr (R < LAUNCH) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
#endif
}

// fp32 D[64 x N] of one warpgroup: warp w holds rows 16w..16w+15; lane l holds, for each 8-column
// group j, the pairs (row 16w + l/4, cols 8j + 2(l%4) + {0,1}) in v[4j], v[4j+1] and
// (row + 8, same cols) in v[4j+2], v[4j+3].
template <int N>
struct accumulator {
  static_assert(N % 8 == 0 && N >= 8 && N <= 256, "wgmma N is a multiple of 8 up to 256");
  static constexpr int REGS = N / 2;
  float v[REGS];
  __device__ static int row(int i) {
    int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
    return 16 * warp + lane / 4 + ((i & 2) ? 8 : 0);
  }
  __device__ static int col(int i) { return 8 * (i / 4) + 2 * ((threadIdx.x & 31) % 4) + (i & 1); }
};

// The A operand of wgmma_rs (m64nNk16, A from registers): per warp the same 16 x 16 fragment as
// mma.sync's A (lane l: rows 16w + l/4 and +8, columns 2(l%4) + {0,1} and +8), four 32-bit registers
// of two 16-bit values. Columns 16k..16k+15 of an accumulator are its 8-column groups 2k and 2k+1,
// whose values v[8k .. 8k+7] are, in order, exactly those fragment pairs: the conversion is a packing
// of consecutive accumulator values, no data moves between threads.
template <typename T>
struct a_fragment {
  uint32_t r[4];
};

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&v);
}

// frag = 16-bit (round to nearest) copy of columns 16k .. 16k+15 of the accumulator values v.
template <typename T, int R>
__device__ __forceinline__ void to_a_fragment(a_fragment<T> &frag, const float (&v)[R], int k) {
#pragma unroll
  for (int i = 0; i < 4; i++) frag.r[i] = pack2<T>(v[8 * k + 2 * i], v[8 * k + 2 * i + 1]);
}

// The inverse placement: frag's registers are the four 8x8 matrices (rows 0-7 / 8-15 of the warp's 16) x
// (columns 16k + 0-7 / 8-15), in stmatrix's order; lane l addresses row l % 16, column 16k + 8 (l / 16), as
// ldmatrix.x4 does. 4 instructions store a warpgroup's 64 x 64 tile where 16 32-bit stores did (each with
// its own address register).
template <typename T>
__device__ __forceinline__ void store_a_fragment(char *tile, const a_fragment<T> &frag, int k) {
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  stmatrix_x4(smem_u32(tile + swizzle128_offset(16 * warp + (lane & 15), 16 * k + 8 * (lane >> 4))), frag.r);
}

// The warpgroup's 64 x N accumulator values v (accumulator<N>'s layout, N a multiple of 16), rounded to T, into 128B-
// swizzled [64 x 64] 16-bit tiles, columns 64p .. 64p + 63 at tile + p panel_bytes: N / 16 stmatrix.x4 a warp, the
// layout a TMA store of 64-column boxes reads.
template <typename T, int R>
__device__ __forceinline__ void store_tile(char *tile, const float (&v)[R], int panel_bytes) {
  static_assert(R % 8 == 0, "store_tile: N a multiple of 16");
#pragma unroll
  for (int k = 0; k < R / 8; k++) {
    a_fragment<T> f;
    to_a_fragment(f, v, k);
    store_a_fragment(tile + (k / 4) * panel_bytes, f, k % 4);
  }
}

// store_a_fragment's inverse: frag = columns 16k .. 16k + 15 of this warp's 16 rows of a warpgroup's 128B-swizzled
// [64 x 64] 16-bit tile (one ldmatrix.x4 a warp): the A operand of wgmma_rs read from a K-major shared tile.
template <typename T>
__device__ __forceinline__ void load_a_fragment(a_fragment<T> &frag, const char *tile, int k) {
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
  ldmatrix_x4(frag.r, smem_u32(tile + swizzle128_offset(16 * warp + (lane & 15), 16 * k + 8 * (lane >> 4))));
}

// The same fragment (A[m][k], m = this warp's 16 rows, k = 16k .. 16k + 15) from an MN-major tile: a 128B-swizzled
// [64 k rows x 64 m columns] box, as TMA loads a (K, M) matrix, read by ldmatrix.x4.trans. Lanes 8j .. 8j + 7 address
// the rows k = 16k + 8 (j / 2) + 0..7 at m = 16 warp + 8 (j % 2), so the four transposed 8 x 8 blocks land in the
// register order above (m 0-7 / 8-15 x k 0-7, then k 8-15).
template <typename T>
__device__ __forceinline__ void load_a_fragment_mn(a_fragment<T> &frag, const char *box, int k) {
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, j = lane >> 3;
  ldmatrix_x4_trans(frag.r, smem_u32(box + swizzle128_offset(16 * k + (lane & 7) + 8 * (j >> 1), 16 * warp + 8 * (j & 1))));
}

// 4 x 4 transpose of 32-bit words inside each quad of lanes (the 4 lanes that share an accumulator row): on return
// lane t of the quad holds in w[i] what lane i held in w[t]. Two butterfly stages of two shuffles each: across
// lanes t ^ 2 the off-diagonal 2 x 2 blocks trade places, then across t ^ 1 each 2 x 2 block is transposed.
__device__ __forceinline__ void quad_transpose(uint32_t (&w)[4]) {
  const int t = threadIdx.x & 3;
  const bool hi2 = t & 2, hi1 = t & 1;
  uint32_t a = __shfl_xor_sync(0xffffffffu, hi2 ? w[0] : w[2], 2);
  uint32_t b = __shfl_xor_sync(0xffffffffu, hi2 ? w[1] : w[3], 2);
  if (hi2) { w[0] = a; w[1] = b; } else { w[2] = a; w[3] = b; }
  a = __shfl_xor_sync(0xffffffffu, hi1 ? w[0] : w[1], 1);
  b = __shfl_xor_sync(0xffffffffu, hi1 ? w[2] : w[3], 1);
  if (hi1) { w[0] = a; w[2] = b; } else { w[1] = a; w[3] = b; }
}

// dst[r][c] = 16-bit(v(r, c) * scale[half]) for the warpgroup's 64 x N accumulator values v (accumulator<N>'s layout;
// half 0 = its value pairs 4j, 4j + 1, half 1 = 4j + 2, 4j + 3, i.e. rows row(0) and row(0) + 8 of each lane) into a
// row-major matrix with ld elements between rows, rows r >= rows skipped. Straight from the accumulator each lane
// would write 4 bytes and a warp instruction 8 rows x 16 bytes (half a 32-byte sector per row); here the quad that
// shares a row transposes its words for every 32 columns, so that lane t writes columns 32k + 8t .. + 7: 16 bytes a
// lane, 8 rows x 64 contiguous bytes a warp instruction, a quarter of the store instructions. dst and ld must keep
// every row 16-byte aligned; N a multiple of 32. All lanes run the shuffles (rows >= rows included).
template <typename T, int N>
__device__ __forceinline__ void store_rows(T *dst, int64_t ld, const float (&v)[N / 2], const float (&scale)[2],
                                           int rows) {
  static_assert(N % 32 == 0, "store_rows: N a multiple of 32");
  const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3, t = lane & 3;
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int r = 16 * warp + lane / 4 + 8 * h;
#pragma unroll
    for (int k = 0; k < N / 32; k++) {
      uint32_t w[4];
#pragma unroll
      for (int i = 0; i < 4; i++) {  // column group 4k + i: columns 32k + 8i + 2t, + 1
        const int j = 4 * (4 * k + i) + 2 * h;
        w[i] = pack2<T>(v[j] * scale[h], v[j + 1] * scale[h]);
      }
      quad_transpose(w);             // w = columns 32k + 8t .. 32k + 8t + 7
      if (r < rows) store16(dst + int64_t(r) * ld + 32 * k + 8 * t, w);
    }
  }
}

}  // namespace tk::wg
