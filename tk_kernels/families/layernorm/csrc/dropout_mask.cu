// Debug kernel of the LayerNorm family's dropout: the keep mask a forward with this (seed, offset) applies
// to a (rows, cols) delta, through the kernels' own chunk function (dropout.cuh), for tests that build a
// float64 reference with the kernels' mask. Not on any training path (apart from the rare backward whose
// y is unused: bindings.cpp). One thread per chunk of 8 elements, one 8-byte store.
#include "dropout.cuh"
#include "layernorm.h"

namespace tk_ln {
namespace {

constexpr int MASK_THREADS = 256;

__global__ void __launch_bounds__(MASK_THREADS)
dropout_mask_kernel(uint8_t *mask, const dropout_args drop, int64_t n_chunks) {
  const int64_t chunk = int64_t(blockIdx.x) * MASK_THREADS + threadIdx.x;
  if (chunk >= n_chunks) return;
  uint64_t seed, offset;
  const tk::dropout_key key = tk::load_dropout_key(drop.rng, drop.threshold, seed, offset);
  uint32_t bytes[2] = {0u, 0u};
  dropout_chunk(key, drop.threshold << 16, uint64_t(chunk),
                [&](int j, bool keep) { bytes[j >> 2] |= uint32_t(keep) << (8 * (j & 3)); });
  reinterpret_cast<uint2 *>(mask)[chunk] = make_uint2(bytes[0], bytes[1]);
}

}  // namespace

cudaError_t dropout_mask(uint8_t *mask, const int64_t *rng_state, int64_t rows, int cols, float p,
                         cudaStream_t stream) {
  if (rows < 0 || cols % VEC != 0 || cols < VEC || !(p >= 0.f && p < 1.f) || !mask || !rng_state)
    return cudaErrorInvalidValue;
  const int64_t n_chunks = rows * (cols / VEC);
  if (n_chunks == 0) return cudaSuccess;
  const int64_t blocks = (n_chunks + MASK_THREADS - 1) / MASK_THREADS;
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  dropout_mask_kernel<<<unsigned(blocks), MASK_THREADS, 0, stream>>>(mask, make_dropout_args(rng_state, p), n_chunks);
  return cudaGetLastError();
}

}  // namespace tk_ln
