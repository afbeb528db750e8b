// Base element types, packed pairs, and conversions.
//
// Tensor-core fragments hold elements in PAIRS (two adjacent elements in one 32-bit
// register for 16-bit types, a float2 for fp32). `packed_t<T>` names the pair type.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <concepts>
#include <cstdint>

namespace tk {

using bf16 = __nv_bfloat16;
using half = __half;
using bf16_2 = __nv_bfloat162;
using half_2 = __half2;

// dtypes that the tensor cores take as mma inputs (16-bit).
template <typename T>
concept mma_dtype = std::same_as<T, bf16> || std::same_as<T, half>;
// dtypes a register tile may hold: mma inputs or the fp32 accumulator.
template <typename T>
concept tile_dtype = mma_dtype<T> || std::same_as<T, float>;

template <typename T> struct packed;
template <> struct packed<float> { using type = float2; };
template <> struct packed<bf16> { using type = bf16_2; };
template <> struct packed<half> { using type = half_2; };
template <typename T> using packed_t = typename packed<T>::type;

// ---- pair conversions (round to nearest even) ----
template <typename To, typename From> __device__ __forceinline__ To convert_pair(const From &x);
template <> __device__ __forceinline__ float2 convert_pair<float2, float2>(const float2 &x) { return x; }
template <> __device__ __forceinline__ bf16_2 convert_pair<bf16_2, bf16_2>(const bf16_2 &x) { return x; }
template <> __device__ __forceinline__ half_2 convert_pair<half_2, half_2>(const half_2 &x) { return x; }
template <> __device__ __forceinline__ bf16_2 convert_pair<bf16_2, float2>(const float2 &x) { return __float22bfloat162_rn(x); }
template <> __device__ __forceinline__ half_2 convert_pair<half_2, float2>(const float2 &x) { return __float22half2_rn(x); }
template <> __device__ __forceinline__ float2 convert_pair<float2, bf16_2>(const bf16_2 &x) { return __bfloat1622float2(x); }
template <> __device__ __forceinline__ float2 convert_pair<float2, half_2>(const half_2 &x) { return __half22float2(x); }

// ---- scalar conversions ----
template <typename To> __device__ __forceinline__ To from_float(float x);
template <> __device__ __forceinline__ float from_float<float>(float x) { return x; }
template <> __device__ __forceinline__ bf16 from_float<bf16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ __forceinline__ half from_float<half>(float x) { return __float2half_rn(x); }
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(bf16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(half x) { return __half2float(x); }

// Bit pattern of a 16-bit pair as a 32-bit register (what mma/ldmatrix/movmatrix take).
template <mma_dtype T> __device__ __forceinline__ uint32_t as_u32(const packed_t<T> &x) {
  return *reinterpret_cast<const uint32_t *>(&x);
}
template <mma_dtype T> __device__ __forceinline__ packed_t<T> from_u32(uint32_t x) {
  return *reinterpret_cast<const packed_t<T> *>(&x);
}

}  // namespace tk
