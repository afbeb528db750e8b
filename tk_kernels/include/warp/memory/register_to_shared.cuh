// Register -> shared tile stores (one warp), converting the dtype if needed (fp32 -> bf16/fp16).
//
// store(dst, src): dst (st / st_sub, 16-bit) = src (rt, any tile dtype, either layout).
//   row_l: one 32-bit st.shared per pair (two adjacent columns; never straddles a 16-byte chunk).
//          With the st swizzle these are bank-conflict free (8 rows x 16 bytes per instruction);
//          for storage rows >= 128 bytes the address is one XOR + immediates per store.
//   col_l: a pair spans two rows -> two 16-bit stores.
#pragma once
#include "../../types/register/rt.cuh"
#include "../../types/shared/st.cuh"

namespace tk {

__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void st_shared_b16(uint32_t addr, uint16_t v) {
  asm volatile("st.shared.b16 [%0], %1;\n" ::"r"(addr), "h"(v) : "memory");
}
// stmatrix.x4 (sm_90+), ldmatrix_x4's inverse: four 8x8 16-bit matrices, register r[m] of lane (g, t) holding
// row g, columns 2t, 2t+1 of matrix m; lane l gives the address of row l % 8 of matrix l / 8.
__device__ __forceinline__ void stmatrix_x4(uint32_t smem, const uint32_t (&r)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(smem), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
#else
  __trap();
#endif
}

// store<saddr::lane_xor>(dst, src): the same stores, other address arithmetic (util.cuh).
template <saddr A = saddr::tile_xor, any_st ST, any_rt RT>
__device__ __forceinline__ void store(ST &&dst, const RT &src) {
  using S = std::remove_cvref_t<ST>;
  static_assert(S::rows == RT::rows && S::cols == RT::cols, "store(st, rt): tiles must have the same shape");
  using U = typename S::dtype;
  using U2 = packed_t<U>;
  constexpr int SC = S::storage_cols;
  if constexpr (RT::is_row && SC >= 64) {
    // Fast path (see load() in shared_to_register.cuh for the swizzle algebra): pair k of fragment
    // (i, j) sits at row row0 + 16 i + g + 8 (k & 1), col col0 + 16 j + 2 t + 8 (k >> 1); with one per-lane
    // base P its shared address is  (P ^ (32 (jt & 3) + 16 (k >> 1))) + (16 i + 8 (k & 1)) RB + 128 (jt >> 2).
    constexpr int RB = SC * int(sizeof(U));
    const int g = laneid() >> 2, t = laneid() & 3;
    const int r0 = dst.row_offset(), jt0 = dst.col_offset() / 16;
    // saddr::lane_xor (util.cuh): XOR only the lane's offset (bits 4..6), add the 128-byte multiples after it
    // (same addresses; see load() in shared_to_register.cuh).
    uint32_t p, post;
    if constexpr (A == saddr::lane_xor) {
      p = uint32_t(g * RB) + uint32_t((g << 4) | (4 * t));
      post = smem_u32(dst.base()) + uint32_t(r0 * RB);
    } else {
      p = smem_u32(dst.base()) + uint32_t((r0 + g) * RB) + uint32_t((g << 4) | (4 * t));
      post = 0u;
    }
    for_each_pair<RT>([&](int i, int j, int k) {
      const int jt = jt0 + j;
      const uint32_t addr = (p ^ uint32_t(32 * (jt & 3) + 16 * (k >> 1))) + post +
                            uint32_t((16 * i + 8 * (k & 1)) * RB + 128 * (jt >> 2));
      const U2 v = convert_pair<U2>(src.tiles[i][j][k]);
      st_shared_b32(addr, as_u32<U>(v));
    });
  } else {
    for_each_pair<RT>([&](int i, int j, int k) {
      const U2 v = convert_pair<U2>(src.tiles[i][j][k]);
      const int r = 16 * i + RT::frag_row(k, 0), c = 16 * j + RT::frag_col(k, 0);
      if constexpr (RT::is_row) {
        st_shared_b32(smem_u32(dst.ptr(r, c)), as_u32<U>(v));
      } else {  // a col_l pair spans rows r and r + 1
        const uint32_t bits = as_u32<U>(v);
        st_shared_b16(smem_u32(dst.ptr(r, c)), uint16_t(bits & 0xffffu));
        st_shared_b16(smem_u32(dst.ptr(r + 1, c)), uint16_t(bits >> 16));
      }
    });
  }
}

}  // namespace tk
