// Per-thread 16-byte vector access to 8 consecutive elements of a row, converted to/from fp32.
//
//   load8(v, p)    v[0..8) = float(p[0..8))     bf16/fp16: one 16-byte load; fp32: two 16-byte loads
//   store8(p, v)   p[0..8) = T(v[0..8))         (round to nearest even), same widths
//
//   store16(p, w)  the 16 bytes w[0..4) to global p in one st.global.v4 (the compiler split a plain uint4 store of
//                  shuffled words into four 4-byte stores in the attention forward's O store, session 42)
//
// p must be 16-byte aligned (8 elements of a 16-bit type, or the first 4 of fp32, per 16 bytes).
// load8 / store8 are plain C++ on uint4/float4: the compiler emits LDG.E.128 / STG.E.128 there.
// Row-wise memory-bound kernels (the LayerNorm family) keep a row in registers as float[K][8].
#pragma once
#include "../common/base_types.cuh"

namespace tk {

template <typename T>
__device__ __forceinline__ void load8(float (&v)[8], const T *p) {
  if constexpr (std::same_as<T, float>) {
    const float4 a = reinterpret_cast<const float4 *>(p)[0];
    const float4 b = reinterpret_cast<const float4 *>(p)[1];
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
  } else {
    static_assert(mma_dtype<T>, "load8: element type must be float, bf16 or half");
    const uint4 raw = *reinterpret_cast<const uint4 *>(p);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float2 f = convert_pair<float2>(from_u32<T>(words[i]));
      v[2 * i] = f.x;
      v[2 * i + 1] = f.y;
    }
  }
}

template <typename T>
__device__ __forceinline__ void store8(T *p, const float (&v)[8]) {
  if constexpr (std::same_as<T, float>) {
    reinterpret_cast<float4 *>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4 *>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
  } else {
    static_assert(mma_dtype<T>, "store8: element type must be float, bf16 or half");
    uint32_t words[4];
#pragma unroll
    for (int i = 0; i < 4; i++)
      words[i] = as_u32<T>(convert_pair<packed_t<T>>(make_float2(v[2 * i], v[2 * i + 1])));
    *reinterpret_cast<uint4 *>(p) = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

__device__ __forceinline__ void store16(void *p, const uint32_t (&w)[4]) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(w[0]), "r"(w[1]), "r"(w[2]), "r"(w[3])
               : "memory");
}

// v[i] = float(T(v[i])): what storing and reloading in T gives (the reference rounds x + delta to
// the residual dtype before normalizing it).
template <typename T>
__device__ __forceinline__ void round_to(float (&v)[8]) {
  if constexpr (!std::same_as<T, float>) {
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = to_float(from_float<T>(v[i]));
  }
}

}  // namespace tk
