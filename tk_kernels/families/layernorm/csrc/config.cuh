// Row tiling shared by the forward and backward kernels of the LayerNorm family.
//
// A row of `cols` elements is split into chunks of 8 (one 16-byte vector of a 16-bit type, two of
// fp32). A row is owned by a "row group" of G threads, G a power of two in [8, 256]; thread t of the
// group holds chunks t, t + G, t + 2G, ... (K of them, K <= 4) in registers as float[K][8], so
// consecutive threads touch consecutive 16-byte vectors (coalesced) and each element is read once.
// Every CTA has 256 threads = 256 / G row groups (several rows per warp for narrow rows, G / 32
// warps per row for wide ones).
//
// G is the smallest power of two >= 8 with G * max_k >= chunks: the kernel says how many chunks a
// thread may hold (max_k: forward 4, backward 3; see their headers), which bounds its registers, and
// wider rows get more threads. Rows of up to 32 * max_k chunks stay inside one warp (row sums are
// shuffles only); wider rows add one shared-memory exchange and __syncthreads per row sum.
// Examples (forward / backward): C = 768 -> G 32, K 3 for both; C = 1024 -> G 32, K 4 / G 64, K 2;
// C = 2048 -> G 64, K 4 / G 128, K 2; C = 64 -> G 8, K 1 (4 rows per warp); C = 8192 -> G 256, K 4 for both.
#pragma once
#include "tk.cuh"
#include "layernorm.h"

namespace tk_ln {

constexpr int CTA_THREADS = 256;
constexpr int CTA_WARPS = CTA_THREADS / 32;
constexpr int MAX_K = 4;  // chunks per thread at most: 256 * 4 * 8 = 8192 = MAX_COLS

struct Tiling {
  int G;  // threads per row group (a power of two in [8, 256])
  int K;  // chunks of 8 per thread (template argument of the kernels), 1..MAX_K
  int rows_per_cta() const { return CTA_THREADS / G; }
};

inline Tiling tiling(int cols, int max_k) {
  const int chunks = cols / VEC;
  int G = 8;
  while (G * max_k < chunks && G < CTA_THREADS) G *= 2;
  return {G, (chunks + G - 1) / G};
}

// The element type of each DType.
template <DType D> struct ctype;
template <> struct ctype<DType::f32> { using type = float; };
template <> struct ctype<DType::bf16> { using type = tk::bf16; };
template <> struct ctype<DType::f16> { using type = tk::half; };

// 8 elements of T as loaded, not yet converted (16 bytes for 16-bit T, 32 for fp32): the backward
// keeps its loads in flight in this form (4 or 8 registers per chunk instead of 8 floats).
template <typename T> struct raw8 { uint4 v[sizeof(T) / 2]; };
template <typename T> __device__ __forceinline__ void load_raw(raw8<T> &r, const T *p) {
#pragma unroll
  for (int j = 0; j < int(sizeof(T) / 2); j++) r.v[j] = reinterpret_cast<const uint4 *>(p)[j];
}
template <typename T> __device__ __forceinline__ void zero_raw(raw8<T> &r) {
#pragma unroll
  for (int j = 0; j < int(sizeof(T) / 2); j++) r.v[j] = make_uint4(0, 0, 0, 0);
}
template <typename T> __device__ __forceinline__ void to_f32(float (&f)[8], const raw8<T> &r) {
  tk::load8(f, reinterpret_cast<const T *>(&r));
}

__device__ __forceinline__ void add_xor(float &v, int off) { v += __shfl_xor_sync(0xffffffffu, v, off); }
__device__ __forceinline__ void add_xor(float2 &v, int off) {
  v.x += __shfl_xor_sync(0xffffffffu, v.x, off);
  v.y += __shfl_xor_sync(0xffffffffu, v.y, off);
}
__device__ __forceinline__ void add_to(float &a, float b) { a += b; }
__device__ __forceinline__ void add_to(float2 &a, float2 b) { a.x += b.x; a.y += b.y; }

// Sum of `v` over the row group (G threads) of the calling thread, on every thread of the group, in
// a fixed order (bitwise reproducible). Every thread of the CTA must call it, in the same order (it
// holds __syncthreads when G > 32); `red` is CTA_WARPS slots of shared memory that the previous call
// site must not be using any more (alternate two buffers between consecutive calls).
template <typename V>
__device__ __forceinline__ V row_group_sum(V v, int G, V *red) {
  for (int off = (G < 32 ? G : 32) / 2; off > 0; off >>= 1) add_xor(v, off);
  if (G <= 32) return v;
  const int warp = tk::warpid(), W = G / 32;
  if (tk::laneid() == 0) red[warp] = v;
  __syncthreads();
  const int first = warp - warp % W;
  V total = red[first];
  for (int i = 1; i < W; i++) add_to(total, red[first + i]);
  return total;
}

}  // namespace tk_ln
