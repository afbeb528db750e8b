// Element-wise ops on register tiles and vectors (one warp, no communication).
//
// Tiles (any layout unless noted; scalar ops act on fp32 tiles):
//   zero(t)  fill(t, v)  neg_infty(t)            t[:] = 0 / v / -inf
//   copy(dst, src)                               dtype conversion, same shape+layout (fp32 <-> bf16/fp16)
//   exp2(dst, src)                               dst = 2^src (ex2.approx)
//   mul(dst, src, s)  add(dst, src, s)           dst = src * s / src + s          (scalar s)
//   mul(dst, a, b)  add(dst, a, b)  sub(dst, a, b)   element-wise tile-tile
// Row/column broadcasts (fp32 row_l tiles; PyTorch: t - v[:, None] / t - v[None, :]):
//   sub_row(dst, src, cv)  mul_row  div_row  add_row     cv: col_vec (one value per row)
//   sub_col(dst, src, rv)  mul_col  div_col  add_col     rv: row_vec (one value per column)
// Vectors (col_vec or row_vec):
//   zero  fill  neg_infty  copy  exp2  log2  max(dst,a,b)  add/sub/mul/div(dst,a,b)  mul(dst,a,s)
//   unary_map(dst,a,f)  binary_map(dst,a,b,f)  any_of(a,b,pred) (lane-local; combine with warp_any)
#pragma once
#include "../../types/register/rt.cuh"
#include "../../types/register/rv.cuh"

namespace tk {

// ---------------- generic element-wise drivers ----------------
// f(float) -> float applied to every element of an fp32 tile.
template <fp32_rt RT, typename F>
__device__ __forceinline__ void unary_map(RT &dst, const RT &src, F f) {
  for_each_pair<RT>([&](int i, int j, int k) {
    dst.tiles[i][j][k].x = f(src.tiles[i][j][k].x);
    dst.tiles[i][j][k].y = f(src.tiles[i][j][k].y);
  });
}
template <fp32_rt RT, typename F>
__device__ __forceinline__ void binary_map(RT &dst, const RT &a, const RT &b, F f) {
  for_each_pair<RT>([&](int i, int j, int k) {
    dst.tiles[i][j][k].x = f(a.tiles[i][j][k].x, b.tiles[i][j][k].x);
    dst.tiles[i][j][k].y = f(a.tiles[i][j][k].y, b.tiles[i][j][k].y);
  });
}
// f(x, v) where v is the col_vec entry of x's row (row_l tile).
template <fp32_rt RT, typename F>
__device__ __forceinline__ void row_map(RT &dst, const RT &src, const col_vec<RT::rows> &v, F f) {
  static_assert(RT::is_row, "row ops (sub_row, mul_row, ...) need a row_l tile");
  for_each_pair<RT>([&](int i, int j, int k) {
    const float r = v.data[i][k & 1];  // row_l: data[k] sits in row g + 8*(k & 1)
    dst.tiles[i][j][k].x = f(src.tiles[i][j][k].x, r);
    dst.tiles[i][j][k].y = f(src.tiles[i][j][k].y, r);
  });
}
// f(x, v) where v is the row_vec entry of x's column (row_l tile).
template <fp32_rt RT, typename F>
__device__ __forceinline__ void col_map(RT &dst, const RT &src, const row_vec<RT::cols> &v, F f) {
  static_assert(RT::is_row, "column ops (sub_col, mul_col, ...) need a row_l tile");
  for_each_pair<RT>([&](int i, int j, int k) {
    const float2 c = v.data[j][k >> 1];  // row_l: data[k] sits in cols 2t + 8*(k >> 1) + {0, 1}
    dst.tiles[i][j][k].x = f(src.tiles[i][j][k].x, c.x);
    dst.tiles[i][j][k].y = f(src.tiles[i][j][k].y, c.y);
  });
}

// ---------------- tiles ----------------
template <any_rt RT> __device__ __forceinline__ void fill(RT &t, float v) {
  using T2 = typename RT::dtype2;
  const T2 p = convert_pair<T2>(make_float2(v, v));
  for_each_pair<RT>([&](int i, int j, int k) { t.tiles[i][j][k] = p; });
}
template <any_rt RT> __device__ __forceinline__ void zero(RT &t) { fill(t, 0.f); }
template <any_rt RT> __device__ __forceinline__ void neg_infty(RT &t) { fill(t, neg_infty()); }

template <any_rt RD, any_rt RS>
__device__ __forceinline__ void copy(RD &dst, const RS &src) {
  static_assert(same_shape<RD, RS>, "copy(rt, rt): tiles must have the same shape");
  static_assert(std::same_as<typename RD::layout, typename RS::layout>,
                "copy(rt, rt): layouts differ (use swap_layout to change layout)");
  for_each_pair<RD>([&](int i, int j, int k) {
    dst.tiles[i][j][k] = convert_pair<typename RD::dtype2>(src.tiles[i][j][k]);
  });
}

template <fp32_rt RT> __device__ __forceinline__ void exp2(RT &dst, const RT &src) {
  unary_map(dst, src, [](float x) { return fast_exp2(x); });
}
template <fp32_rt RT> __device__ __forceinline__ void mul(RT &dst, const RT &src, float s) {
  unary_map(dst, src, [s](float x) { return x * s; });
}
template <fp32_rt RT> __device__ __forceinline__ void add(RT &dst, const RT &src, float s) {
  unary_map(dst, src, [s](float x) { return x + s; });
}
template <fp32_rt RT> __device__ __forceinline__ void mul(RT &dst, const RT &a, const RT &b) {
  binary_map(dst, a, b, [](float x, float y) { return x * y; });
}
template <fp32_rt RT> __device__ __forceinline__ void add(RT &dst, const RT &a, const RT &b) {
  binary_map(dst, a, b, [](float x, float y) { return x + y; });
}
template <fp32_rt RT> __device__ __forceinline__ void sub(RT &dst, const RT &a, const RT &b) {
  binary_map(dst, a, b, [](float x, float y) { return x - y; });
}

template <fp32_rt RT> __device__ __forceinline__ void sub_row(RT &dst, const RT &src, const col_vec<RT::rows> &v) {
  row_map(dst, src, v, [](float x, float r) { return x - r; });
}
template <fp32_rt RT> __device__ __forceinline__ void add_row(RT &dst, const RT &src, const col_vec<RT::rows> &v) {
  row_map(dst, src, v, [](float x, float r) { return x + r; });
}
template <fp32_rt RT> __device__ __forceinline__ void mul_row(RT &dst, const RT &src, const col_vec<RT::rows> &v) {
  row_map(dst, src, v, [](float x, float r) { return x * r; });
}
template <fp32_rt RT> __device__ __forceinline__ void div_row(RT &dst, const RT &src, const col_vec<RT::rows> &v) {
  row_map(dst, src, v, [](float x, float r) { return x / r; });
}
template <fp32_rt RT> __device__ __forceinline__ void sub_col(RT &dst, const RT &src, const row_vec<RT::cols> &v) {
  col_map(dst, src, v, [](float x, float c) { return x - c; });
}
template <fp32_rt RT> __device__ __forceinline__ void add_col(RT &dst, const RT &src, const row_vec<RT::cols> &v) {
  col_map(dst, src, v, [](float x, float c) { return x + c; });
}
template <fp32_rt RT> __device__ __forceinline__ void mul_col(RT &dst, const RT &src, const row_vec<RT::cols> &v) {
  col_map(dst, src, v, [](float x, float c) { return x * c; });
}
template <fp32_rt RT> __device__ __forceinline__ void div_col(RT &dst, const RT &src, const row_vec<RT::cols> &v) {
  col_map(dst, src, v, [](float x, float c) { return x / c; });
}

// ---------------- vectors ----------------
template <any_rv V, typename F>
__device__ __forceinline__ void unary_map(V &dst, const V &a, F f) {
  float *d = reinterpret_cast<float *>(dst.data);
  const float *x = reinterpret_cast<const float *>(a.data);
#pragma unroll
  for (int i = 0; i < int(sizeof(V) / sizeof(float)); i++) d[i] = f(x[i]);
}
template <any_rv V, typename F>
__device__ __forceinline__ void binary_map(V &dst, const V &a, const V &b, F f) {
  float *d = reinterpret_cast<float *>(dst.data);
  const float *x = reinterpret_cast<const float *>(a.data);
  const float *y = reinterpret_cast<const float *>(b.data);
#pragma unroll
  for (int i = 0; i < int(sizeof(V) / sizeof(float)); i++) d[i] = f(x[i], y[i]);
}
// Lane-local: does f(a[i], b[i]) hold for any entry this lane holds? (combine with warp_any)
template <any_rv V, typename F>
__device__ __forceinline__ bool any_of(const V &a, const V &b, F f) {
  const float *x = reinterpret_cast<const float *>(a.data);
  const float *y = reinterpret_cast<const float *>(b.data);
  bool r = false;
#pragma unroll
  for (int i = 0; i < int(sizeof(V) / sizeof(float)); i++) r |= f(x[i], y[i]);
  return r;
}
template <any_rv V> __device__ __forceinline__ void fill(V &v, float s) { unary_map(v, v, [s](float) { return s; }); }
template <any_rv V> __device__ __forceinline__ void zero(V &v) { fill(v, 0.f); }
template <any_rv V> __device__ __forceinline__ void neg_infty(V &v) { fill(v, neg_infty()); }
template <any_rv V> __device__ __forceinline__ void copy(V &dst, const V &a) { dst = a; }
template <any_rv V> __device__ __forceinline__ void exp2(V &dst, const V &a) {
  unary_map(dst, a, [](float x) { return fast_exp2(x); });
}
template <any_rv V> __device__ __forceinline__ void log2(V &dst, const V &a) {
  unary_map(dst, a, [](float x) { return fast_log2(x); });
}
template <any_rv V> __device__ __forceinline__ void mul(V &dst, const V &a, float s) {
  unary_map(dst, a, [s](float x) { return x * s; });
}
template <any_rv V> __device__ __forceinline__ void max(V &dst, const V &a, const V &b) {
  binary_map(dst, a, b, [](float x, float y) { return fmaxf(x, y); });
}
template <any_rv V> __device__ __forceinline__ void add(V &dst, const V &a, const V &b) {
  binary_map(dst, a, b, [](float x, float y) { return x + y; });
}
template <any_rv V> __device__ __forceinline__ void sub(V &dst, const V &a, const V &b) {
  binary_map(dst, a, b, [](float x, float y) { return x - y; });
}
template <any_rv V> __device__ __forceinline__ void mul(V &dst, const V &a, const V &b) {
  binary_map(dst, a, b, [](float x, float y) { return x * y; });
}
template <any_rv V> __device__ __forceinline__ void div(V &dst, const V &a, const V &b) {
  binary_map(dst, a, b, [](float x, float y) { return x / y; });
}

}  // namespace tk
