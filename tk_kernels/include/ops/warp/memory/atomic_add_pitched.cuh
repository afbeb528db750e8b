// fp32 atomic-add of a register tile into a row-major fp32 array whose row pitch is a compile-time
// constant (one warp). Added for the attention backward (dQ partial sums into a (B, H, T, D)
// contiguous fp32 workspace, pitch D).
//
//   atomic_add<PITCH>(dst, src, n_rows):  dst[r * PITCH + c] += src[r][c]  for r < n_rows
//
// Compared with atomic_add(gl<float>, rt, coord) (runtime t_stride): with PITCH known, every
// fragment's offset from the lane's first element is an immediate, so the warp needs one 64-bit
// address instead of one per fragment (this matters in kernels that run at the register limit).
// row_l tiles only. On sm_90+ each pair is one vector red.add (atomicAdd(float2 *)); earlier
// architectures issue two scalar red.add.
// Knobs for the unguarded (whole tile in range) path, sm_90+ only (older GPUs keep the scalar reds):
//   TK_RED_IMM=1   the reds are inline PTX with the lane base in one 64-bit register and every
//                  fragment's offset as an immediate (the compiler otherwise rebuilds several 64-bit
//                  addresses per tile).
//   TK_RED_V4=1    (implies the inline-PTX form) lanes 2u and 2u+1 swap one pair with a shuffle so that
//                  each lane holds 4 consecutive floats of one row: one red.global.add.v4.f32 per 16x8
//                  accumulator instead of two .v2 (half the red instructions and L2 atomic requests, for
//                  2 shuffles + 6 selects). dst must then be 16-byte aligned and PITCH a multiple of 4.
#pragma once
#include <utility>
#include "../../../types/register/rt.cuh"

#ifndef TK_RED_IMM
#define TK_RED_IMM 0
#endif
#ifndef TK_RED_V4
#define TK_RED_V4 0
#endif

namespace tk {

namespace detail {
// One pair: dst[0..1] += v (vector red.add on sm_90+, two scalar ones before).
__device__ __forceinline__ void red_add_pair(float *p, const float2 &v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2 *>(p), v);  // 8-byte aligned: 2t and PITCH are even
#else
  atomicAdd(p, v.x);
  atomicAdd(p + 1, v.y);
#endif
}
// red.global.add.v2 / .v4 .f32 at p + OFF bytes (sm_90+; OFF an immediate of the instruction).
template <int OFF>
__device__ __forceinline__ void red_add_v2(float *p, float x, float y) {
  asm volatile("red.global.add.v2.f32 [%0+%3], {%1, %2};" ::"l"(p), "f"(x), "f"(y), "n"(OFF));
}
template <int OFF>
__device__ __forceinline__ void red_add_v4(float *p, float x, float y, float z, float w) {
  asm volatile("red.global.add.v4.f32 [%0+%5], {%1, %2, %3, %4};" ::"l"(p), "f"(x), "f"(y), "f"(z), "f"(w),
               "n"(OFF));
}
// f(std::integral_constant<int, I>{}) for I = 0 .. N-1 (compile-time indices for immediates).
template <int N, typename F>
__device__ __forceinline__ void static_for(F &&f) {
  [&]<int... I>(std::integer_sequence<int, I...>) { (f(std::integral_constant<int, I>{}), ...); }(
      std::make_integer_sequence<int, N>{});
}
}  // namespace detail

template <int PITCH, fp32_rt RT>
__device__ __forceinline__ void atomic_add(float *dst, const RT &src, int n_rows) {
  static_assert(RT::is_row, "atomic_add<PITCH>(float*, rt, n): row_l tiles only");
  static_assert(PITCH % 2 == 0 && PITCH >= RT::cols, "atomic_add<PITCH>: pitch must be even and >= the tile width");
  const int g = laneid() >> 2, t = laneid() & 3;
  float *lane_base = dst + g * PITCH + 2 * t;     // this lane's (row g, col 2t)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if constexpr (TK_RED_V4) {
    static_assert(PITCH % 4 == 0, "atomic_add<PITCH> with TK_RED_V4: pitch must be a multiple of 4");
    if (n_rows >= RT::rows) {
      // Lane pair (t even, t + 1) of a 16x8 accumulator holds row g cols 2t..2t+3 and row g + 8 cols
      // 2t..2t+3 after the swap: the even lane keeps row g, the odd lane row g + 8.
      const bool odd = t & 1;
      float *v4_base = dst + (g + 8 * (t & 1)) * PITCH + 2 * (t & ~1);
      detail::static_for<RT::height>([&](auto I) {
        detail::static_for<RT::width>([&](auto J) {
          detail::static_for<2>([&](auto H) {  // n8 half: pairs 2H (row g) and 2H + 1 (row g + 8)
            const float2 lo = src.tiles[I][J][2 * H], hi = src.tiles[I][J][2 * H + 1];
            const float sx = odd ? lo.x : hi.x, sy = odd ? lo.y : hi.y;   // what the partner needs
            const float rx = __shfl_xor_sync(0xffffffffu, sx, 1), ry = __shfl_xor_sync(0xffffffffu, sy, 1);
            constexpr int off = 4 * (16 * I * PITCH + 16 * J + 8 * H);
            detail::red_add_v4<off>(v4_base, odd ? rx : lo.x, odd ? ry : lo.y, odd ? hi.x : rx, odd ? hi.y : ry);
          });
        });
      });
      return;
    }
  }
  if constexpr (TK_RED_IMM || TK_RED_V4) {
    if (n_rows >= RT::rows) {
      float *lane_base = dst + g * PITCH + 2 * t;
      detail::static_for<RT::height>([&](auto I) {
        detail::static_for<RT::width>([&](auto J) {
          detail::static_for<4>([&](auto K) {
            constexpr int off = 4 * ((16 * I + 8 * (K & 1)) * PITCH + 16 * J + 8 * (K >> 1));
            detail::red_add_v2<off>(lane_base, src.tiles[I][J][K].x, src.tiles[I][J][K].y);
          });
        });
      });
      return;
    }
  }
#endif
  if (n_rows >= RT::rows) {
    // Whole tile in range (the common case): no per-row guards, every address is lane_base + immediate.
#pragma unroll
    for (int i = 0; i < RT::height; i++)
#pragma unroll
      for (int j = 0; j < RT::width; j++)
#pragma unroll
        for (int k = 0; k < 4; k++)
          detail::red_add_pair(lane_base + (16 * i + 8 * (k & 1)) * PITCH + 16 * j + 8 * (k >> 1), src.tiles[i][j][k]);
  } else {
#pragma unroll
    for (int i = 0; i < RT::height; i++)
#pragma unroll
      for (int j = 0; j < RT::width; j++)
#pragma unroll
        for (int k = 0; k < 4; k++) {
          const int r = 16 * i + 8 * (k & 1);     // row offset of pair k beyond row g
          if (g + r < n_rows) detail::red_add_pair(lane_base + r * PITCH + 16 * j + 8 * (k >> 1), src.tiles[i][j][k]);
        }
  }
}

}  // namespace tk
