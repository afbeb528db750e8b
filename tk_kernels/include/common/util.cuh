// Small device utilities and constants shared by the whole DSL.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace tk {

// How ldmatrix loads and fragment stores of a swizzled shared tile (shared_to_register.cuh,
// register_to_shared.cuh) compute their addresses. Both give the same addresses; the instruction
// sequences differ, and which one needs fewer registers depends on the kernel, so the kernel picks
// it per call (template argument of load / load_B / store; default tile_xor):
//   tile_xor  the swizzle XOR is applied to (tile base + row offset + lane offset): one XOR per access,
//             everything else immediates.
//   lane_xor  the XOR is applied to the lane's offset only; tile and sub-tile offsets (multiples of 128
//             bytes) are added after it, so the XORed lane offsets are loop-invariant (4 values) and
//             every run-time offset is one add.
enum class saddr { tile_xor, lane_xor };

constexpr int WARP_THREADS = 32;
constexpr int TILE_DIM = 16;          // register tiles are made of 16x16 fragments
constexpr float LOG2E = 1.4426950408889634f;
constexpr float LN2 = 0.6931471805599453f;

__device__ __forceinline__ int laneid() { return threadIdx.x & 31; }
__device__ __forceinline__ int warpid() { return threadIdx.x >> 5; }

// True on every lane if `pred` is true on any lane of the (fully active) warp.
__device__ __forceinline__ bool warp_any(bool pred) { return __any_sync(0xffffffffu, pred); }

// Sum over the 32 lanes of a (fully active) warp, returned on every lane (butterfly of shuffles).
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}
__device__ __forceinline__ float2 warp_sum(float2 x) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    x.x += __shfl_xor_sync(0xffffffffu, x.x, off);
    x.y += __shfl_xor_sync(0xffffffffu, x.y, off);
  }
  return x;
}

__device__ __forceinline__ float neg_infty() { return __int_as_float(0xff800000); }
__device__ __forceinline__ float pos_infty() { return __int_as_float(0x7f800000); }

// Generic address of a shared-memory object -> 32-bit shared-window address (for PTX).
__device__ __forceinline__ uint32_t smem_u32(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Fast 2^x (ex2.approx.ftz: 2 ulp, flushes denormals; 2^-inf = 0).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// Fast log2(x) (lg2.approx.ftz).
__device__ __forceinline__ float fast_log2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// One 8-byte shared-memory store of a float pair (st.shared.v2.f32; dst 8-byte aligned), kept in
// program order ("memory" clobber) for the bulk copies that read the buffer afterwards.
__device__ __forceinline__ void store_shared(float *dst, float2 v) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(smem_u32(dst)), "f"(v.x), "f"(v.y) : "memory");
}

// Bump allocator over the dynamic shared memory of a CTA. Every allocation is 128-byte aligned:
// the swizzled ldmatrix addressing (shared_to_register.cuh) relies on each shared tile starting on a
// 128-byte boundary, and it keeps TMA/wgmma layouts possible later.
struct shared_allocator {
  char *ptr;
  __device__ explicit shared_allocator(void *base) : ptr(static_cast<char *>(base)) {}
  template <typename T> __device__ T &allocate() {
    // Pad with pointer arithmetic on `ptr` (never an integer -> pointer cast), so the compiler still
    // sees a __shared__ address and emits LDS/STS with 32-bit addresses instead of generic LD/ST.
    char *p = ptr + ((0u - static_cast<unsigned>(reinterpret_cast<uintptr_t>(ptr))) & 127u);
    ptr = p + sizeof(T);
    return *reinterpret_cast<T *>(p);
  }
};
// Host-side twin: bytes a sequence of allocate<T>() calls needs (with 128-byte alignment).
template <typename... Ts> constexpr int shared_bytes() {
  int total = 0;
  ((total = ((total + 127) / 128) * 128 + int(sizeof(Ts))), ...);
  return total + 128;  // slack: the dynamic smem base is only guaranteed 16-byte aligned
}

}  // namespace tk
