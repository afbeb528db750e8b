// Host side of TMA: a CUtensorMap describing a 2-D row-major matrix and the box (tile) that one
// load or store moves. Built with the driver's cuTensorMapEncodeTiled, reached through the CUDA
// runtime's entry-point query, so nothing links against libcuda directly.
//
//   CUtensorMap m = tk::host::matrix_map<__nv_bfloat16>(ptr, rows, cols, row_stride_elems,
//                                                       box_rows, box_cols, swizzle_bytes);
//
//   CUtensorMap m = tk::host::tensor_map_4d<__nv_bfloat16>(ptr, {d0, d1, d2, d3}, {s1, s2, s3},
//                                                          {b0, b1, b2, b3}, swizzle_bytes);
//     rank 4, dims innermost first (d0 contiguous), s1..s3 the byte strides of dims 1..3 (any
//     order of magnitude: e.g. (D, T, H, B) of a (B, T, H, D) or (B, H, T, D) tensor), box b0..b3.
//
// Requirements (checked; std::runtime_error with the reason otherwise): base 16-byte aligned,
// row stride a multiple of 16 bytes, box_cols * sizeof(T) <= swizzle_bytes when swizzled
// (128 for the wgmma layouts of warpgroup/mma.cuh), box dims <= 256. Elements outside
// (rows, cols) read as zero and are not written.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>

namespace tk::host {

template <typename T> constexpr CUtensorMapDataType tma_dtype();
template <> constexpr CUtensorMapDataType tma_dtype<__nv_bfloat16>() { return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16; }
template <> constexpr CUtensorMapDataType tma_dtype<__half>() { return CU_TENSOR_MAP_DATA_TYPE_FLOAT16; }
template <> constexpr CUtensorMapDataType tma_dtype<float>() { return CU_TENSOR_MAP_DATA_TYPE_FLOAT32; }

inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void *p = nullptr;
    cudaDriverEntryPointQueryResult found;
    cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000,
                                                       cudaEnableDefault, &found);
    if (err != cudaSuccess || found != cudaDriverEntryPointSuccess || p == nullptr)
      throw std::runtime_error("tk: the CUDA driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12+)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// cuTensorMapEncodeTiled is a driver call: it needs a CUDA context current on the calling thread, and it
// fails with CUDA_ERROR_INVALID_CONTEXT (201) on a thread whose CUDA runtime calls have not bound one yet.
// PyTorch's autograd worker threads are such threads when their first CUDA work is our op (seen on the H200:
// the MLP backward with bf16 weights, where nothing before it launched a kernel). cudaFree(nullptr) makes
// the runtime bind the current device's primary context to the thread; once per thread (a later
// cudaSetDevice binds the new device's context itself).
inline void bind_context() {
  thread_local bool bound = false;
  if (!bound) {
    cudaError_t err = cudaFree(nullptr);
    if (err != cudaSuccess)
      throw std::runtime_error(std::string("tk: no CUDA context for the TMA tensor map: ") + cudaGetErrorString(err));
    bound = true;
  }
}

inline CUtensorMapSwizzle tma_swizzle(int bytes) {
  switch (bytes) {
    case 0: return CU_TENSOR_MAP_SWIZZLE_NONE;
    case 32: return CU_TENSOR_MAP_SWIZZLE_32B;
    case 64: return CU_TENSOR_MAP_SWIZZLE_64B;
    case 128: return CU_TENSOR_MAP_SWIZZLE_128B;
  }
  throw std::runtime_error("tk: TMA swizzle must be 0, 32, 64 or 128 bytes, got " + std::to_string(bytes));
}

template <typename T>
CUtensorMap matrix_map(const void *ptr, uint64_t rows, uint64_t cols, uint64_t row_stride,
                       uint32_t box_rows, uint32_t box_cols, int swizzle_bytes) {
  auto fail = [](const std::string &why) { throw std::runtime_error("tk: TMA tensor map: " + why); };
  if (reinterpret_cast<uintptr_t>(ptr) % 16) fail("base address not 16-byte aligned");
  if ((row_stride * sizeof(T)) % 16) fail("row stride not a multiple of 16 bytes");
  if (box_rows == 0 || box_rows > 256 || box_cols == 0 || box_cols > 256) fail("box dims must be in 1..256");
  if (swizzle_bytes && box_cols * sizeof(T) > uint32_t(swizzle_bytes)) fail("box row wider than the swizzle");
  bind_context();
  CUtensorMap map;
  cuuint64_t dims[2] = {cols, rows};
  cuuint64_t strides[1] = {row_stride * sizeof(T)};
  cuuint32_t box[2] = {box_cols, box_rows};
  cuuint32_t elem_strides[2] = {1, 1};
  CUresult r = encode_tiled()(&map, tma_dtype<T>(), 2, const_cast<void *>(ptr), dims, strides, box,
                              elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, tma_swizzle(swizzle_bytes),
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) fail("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(int(r)));
  return map;
}

template <typename T>
CUtensorMap tensor_map_4d(const void *ptr, const uint64_t (&dims)[4], const uint64_t (&byte_strides)[3],
                          const uint32_t (&box)[4], int swizzle_bytes) {
  auto fail = [](const std::string &why) { throw std::runtime_error("tk: TMA tensor map: " + why); };
  if (reinterpret_cast<uintptr_t>(ptr) % 16) fail("base address not 16-byte aligned");
  for (int i = 0; i < 3; i++)
    if (byte_strides[i] % 16 || byte_strides[i] >= (uint64_t(1) << 40)) fail("strides must be multiples of 16 bytes below 2^40");
  for (int i = 0; i < 4; i++) {
    if (box[i] == 0 || box[i] > 256) fail("box dims must be in 1..256");
    if (dims[i] == 0 || dims[i] > (uint64_t(1) << 32)) fail("dims must be in 1..2^32");
  }
  if (swizzle_bytes && box[0] * sizeof(T) > uint32_t(swizzle_bytes)) fail("box row wider than the swizzle");
  bind_context();
  CUtensorMap map;
  cuuint64_t d[4] = {dims[0], dims[1], dims[2], dims[3]};
  cuuint64_t s[3] = {byte_strides[0], byte_strides[1], byte_strides[2]};
  cuuint32_t b[4] = {box[0], box[1], box[2], box[3]};
  cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  CUresult r = encode_tiled()(&map, tma_dtype<T>(), 4, const_cast<void *>(ptr), d, s, b, elem_strides,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, tma_swizzle(swizzle_bytes),
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) fail("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(int(r)));
  return map;
}

}  // namespace tk::host
