// Bulk asynchronous reductions, shared -> global (Hopper's TMA unit, sm_90+), and the fp32 staging
// store that feeds them. Added for the attention backward's dQ partial sums: instead of one red.add
// instruction per pair of floats (which fills the load/store queue and holds its source registers
// until the queue drains), a warp writes its 32 x 32 fp32 tile to shared memory and hands the 4 KB
// block to the TMA unit, which adds it into global memory in the background. The global buffer
// therefore holds the same blocked layout (see xor32_offset).
//
//   store_xor32(dst, src)               dst (4 KB shared block, xor32 layout below) = src (32 x 32 fp32 tile)
//   fence_proxy_async_shared()          make this thread's shared writes visible to the bulk (async) proxy
//   bulk_reduce_add(dst, src, bytes)    dst[0 .. bytes/4) += src[0 .. bytes/4)   (global fp32 += shared fp32)
//   bulk_commit_group()                 close this thread's group of bulk operations
//   bulk_wait_group_read<N>()           wait until at most N of this thread's groups still READ shared memory
//   bulk_wait_group<N>()                wait until at most N of this thread's groups are incomplete
//
// The order a warp needs: wait_group_read (the previous reduction has read the staging block) ->
// __syncwarp -> store_xor32 -> fence_proxy_async_shared -> __syncwarp -> bulk_reduce_add by one lane ->
// bulk_commit_group; and bulk_wait_group<0> before the CTA exits. Addresses 16-byte aligned, bytes a
// multiple of 16. The bulk ops are sm_90+ only (see below).
#pragma once
#include "../../../types/register/rt.cuh"

namespace tk {

// fp32 32 x 32 blocks in the "xor32" layout: 32 rows of 32 floats (4 KB, contiguous), with the four
// 8-float groups of row r permuted by XOR with (r & 3):  element (r, c) is at  r * 32 + (c ^ 8 (r & 3)).
// A warp's 8-byte fragment stores then cover all 32 banks per half warp (two wavefronts per store, the
// minimum), and a whole block is one contiguous bulk copy. Whoever reads the block back (e.g. a convert
// kernel) uses xor32_offset.
__host__ __device__ constexpr int xor32_offset(int r, int c) { return r * 32 + (c ^ (8 * (r & 3))); }

// dst (4 KB shared block, xor32 layout) = src (32 x 32 fp32 row_l register tile).
template <fp32_rt RT>
__device__ __forceinline__ void store_xor32(float *dst, const RT &src) {
  static_assert(RT::is_row && RT::rows == 32 && RT::cols == 32, "store_xor32: 32 x 32 row_l fp32 tiles only");
  const int g = laneid() >> 2, t = laneid() & 3;
  // pair k of fragment (i, j): row 16 i + 8 (k & 1) + g (so r & 3 = g & 3), col 16 j + 8 (k >> 1) + 2 t
  for_each_pair<RT>([&](int i, int j, int k) {
    const int r = 16 * i + 8 * (k & 1) + g, c = 16 * j + 8 * (k >> 1) + 2 * t;
    const float2 v = src.tiles[i][j][k];  // c is even: an 8-byte aligned pair
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(smem_u32(dst + xor32_offset(r, c))), "f"(v.x), "f"(v.y)
                 : "memory");
  });
}

// (Declared for every architecture so kernels that pick the path at run time compile everywhere; before
// sm_90 the waits and the fence do nothing and bulk_reduce_add traps: launchers must not take the bulk
// path there.)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define TK_BULK_ASM(...) asm volatile(__VA_ARGS__)
#else
#define TK_BULK_ASM(...) ((void)0)
#endif
__device__ __forceinline__ void fence_proxy_async_shared() { TK_BULK_ASM("fence.proxy.async.shared::cta;\n" ::: "memory"); }
__device__ __forceinline__ void bulk_reduce_add(float *dst, const float *src, int bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(
                   __cvta_generic_to_global(dst)),
               "r"(smem_u32(src)), "r"(bytes)
               : "memory");
#else
  __trap();
#endif
}
__device__ __forceinline__ void bulk_commit_group() { TK_BULK_ASM("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_group_read() {
  TK_BULK_ASM("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void bulk_wait_group() {
  TK_BULK_ASM("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory");
}
#undef TK_BULK_ASM

}  // namespace tk
