// Tensor-core matrix multiply-accumulate on register tiles (one warp), mma.sync.m16n8k16,
// bf16/fp16 inputs, fp32 accumulation. D may be the same object as C (in-place accumulate).
//
//   mma_AB  (D, A, B, C):  D = A   @ B   + C    A: M x K row_l   B: K x N col_l
//   mma_ABt (D, A, B, C):  D = A   @ B^T + C    A: M x K row_l   B: N x K row_l
//   mma_AtB (D, A, B, C):  D = A^T @ B   + C    A: K x M col_l   B: K x N col_l
//   mma_AtBt(D, A, B, C):  D = A^T @ B^T + C    A: K x M col_l   B: N x K row_l
//   D, C: M x N fp32 row_l.
//
// Why these layouts: the m16n8k16 A operand is the row_l fragment of an M x K matrix, and its
// B operand (K x 8) is the row_l fragment of the 8 x K matrix B^T (see rt.cuh). A col_l tile of
// X carries the row_l fragment of X^T, so A^T / B given in col_l are already in operand form.
// Per 16x16 output fragment and 16-wide k step (a = A fragment, b = row_l fragment of B^T):
//   cols 0..7  of D: mma(a, {b[0], b[2]}) -> {d[0], d[1]}
//   cols 8..15 of D: mma(a, {b[1], b[3]}) -> {d[2], d[3]}
#pragma once
#include "../../types/register/rt.cuh"

namespace tk {

namespace detail {
template <mma_dtype T>
__device__ __forceinline__ void mma_m16n8k16(float2 &d0, float2 &d1, const packed_t<T> (&a)[4], const packed_t<T> &b0,
                                             const packed_t<T> &b1, const float2 &c0, const float2 &c1) {
  if constexpr (std::same_as<T, bf16>) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d0.x), "=f"(d0.y), "=f"(d1.x), "=f"(d1.y)
        : "r"(as_u32<T>(a[0])), "r"(as_u32<T>(a[1])), "r"(as_u32<T>(a[2])), "r"(as_u32<T>(a[3])),
          "r"(as_u32<T>(b0)), "r"(as_u32<T>(b1)), "f"(c0.x), "f"(c0.y), "f"(c1.x), "f"(c1.y));
  } else {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
        : "=f"(d0.x), "=f"(d0.y), "=f"(d1.x), "=f"(d1.y)
        : "r"(as_u32<T>(a[0])), "r"(as_u32<T>(a[1])), "r"(as_u32<T>(a[2])), "r"(as_u32<T>(a[3])),
          "r"(as_u32<T>(b0)), "r"(as_u32<T>(b1)), "f"(c0.x), "f"(c0.y), "f"(c1.x), "f"(c1.y));
  }
}

// One 16x16x16 step: d = a @ bt^T + c, with a, bt in A-operand (row_l) form.
template <mma_dtype T>
__device__ __forceinline__ void mma_frag(float2 (&d)[4], const packed_t<T> (&a)[4], const packed_t<T> (&bt)[4],
                                         const float2 (&c)[4]) {
  mma_m16n8k16<T>(d[0], d[1], a, bt[0], bt[2], c[0], c[1]);
  mma_m16n8k16<T>(d[2], d[3], a, bt[1], bt[3], c[2], c[3]);
}

// Fragment (i, k) of an operand whose grid is [i][k] (KMAJOR = false) or [k][i] (KMAJOR = true).
template <bool KMAJOR, typename X>
__device__ __forceinline__ const auto &frag_at(const X &x, int i, int k) {
  if constexpr (KMAJOR) return x.tiles[k][i];
  else return x.tiles[i][k];
}

// Shared driver. AT/BT say whether A/B's fragment grid is indexed [k][m] / [k][n] (true) or
// [m][k] / [n][k] (false). k runs outermost so consecutive mmas hit independent accumulators.
template <bool A_KMAJOR, bool B_KMAJOR, int M, int N, int K, typename D, typename A, typename B, typename C>
__device__ __forceinline__ void mma_tiles(D &d, const A &a, const B &b, const C &c) {
  using T = typename A::dtype;
#pragma unroll
  for (int k = 0; k < K; k++)
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
      for (int n = 0; n < N; n++) {
        const auto &af = frag_at<A_KMAJOR>(a, m, k);
        const auto &bf = frag_at<B_KMAJOR>(b, n, k);
        if (k == 0) mma_frag<T>(d.tiles[m][n], af, bf, c.tiles[m][n]);
        else mma_frag<T>(d.tiles[m][n], af, bf, d.tiles[m][n]);
      }
}

template <typename D, typename A, typename B, typename C>
concept mma_operands = fp32_rt<D> && row_rt<D> && std::same_as<D, C> && mma_rt<A> && mma_rt<B> &&
                       std::same_as<typename A::dtype, typename B::dtype>;
}  // namespace detail

template <typename D, typename A, typename B, typename C>
__device__ __forceinline__ void mma_AB(D &d, const A &a, const B &b, const C &c) {
  static_assert(detail::mma_operands<D, A, B, C>, "mma_AB: D and C must be the same fp32 row_l tile type; A and B bf16 or fp16 of one dtype");
  static_assert(A::is_row && !B::is_row, "mma_AB: A must be row_l (M x K) and B col_l (K x N)");
  static_assert(A::cols == B::rows, "mma_AB: inner dimensions differ (A is M x K, B is K x N)");
  static_assert(D::rows == A::rows && D::cols == B::cols, "mma_AB: D must be M x N");
  detail::mma_tiles<false, true, D::height, D::width, A::width>(d, a, b, c);
}

template <typename D, typename A, typename B, typename C>
__device__ __forceinline__ void mma_ABt(D &d, const A &a, const B &b, const C &c) {
  static_assert(detail::mma_operands<D, A, B, C>, "mma_ABt: D and C must be the same fp32 row_l tile type; A and B bf16 or fp16 of one dtype");
  static_assert(A::is_row && B::is_row, "mma_ABt: A must be row_l (M x K) and B row_l (N x K)");
  static_assert(A::cols == B::cols, "mma_ABt: inner dimensions differ (A is M x K, B is N x K)");
  static_assert(D::rows == A::rows && D::cols == B::rows, "mma_ABt: D must be M x N");
  detail::mma_tiles<false, false, D::height, D::width, A::width>(d, a, b, c);
}

template <typename D, typename A, typename B, typename C>
__device__ __forceinline__ void mma_AtB(D &d, const A &a, const B &b, const C &c) {
  static_assert(detail::mma_operands<D, A, B, C>, "mma_AtB: D and C must be the same fp32 row_l tile type; A and B bf16 or fp16 of one dtype");
  static_assert(!A::is_row && !B::is_row, "mma_AtB: A must be col_l (K x M) and B col_l (K x N)");
  static_assert(A::rows == B::rows, "mma_AtB: inner dimensions differ (A is K x M, B is K x N)");
  static_assert(D::rows == A::cols && D::cols == B::cols, "mma_AtB: D must be M x N");
  detail::mma_tiles<true, true, D::height, D::width, A::height>(d, a, b, c);
}

template <typename D, typename A, typename B, typename C>
__device__ __forceinline__ void mma_AtBt(D &d, const A &a, const B &b, const C &c) {
  static_assert(detail::mma_operands<D, A, B, C>, "mma_AtBt: D and C must be the same fp32 row_l tile type; A and B bf16 or fp16 of one dtype");
  static_assert(!A::is_row && B::is_row, "mma_AtBt: A must be col_l (K x M) and B row_l (N x K)");
  static_assert(A::rows == B::cols, "mma_AtBt: inner dimensions differ (A is K x M, B is N x K)");
  static_assert(D::rows == A::cols && D::cols == B::rows, "mma_AtBt: D must be M x N");
  detail::mma_tiles<true, false, D::height, D::width, A::height>(d, a, b, c);
}

}  // namespace tk
