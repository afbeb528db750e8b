// Debug kernel of the attention dropout: the keep mask a forward with this (seed, offset) applies,
// element by element through dropout_keep (dropout.cuh), for tests that build a float64 reference
// with the kernels' own mask. Not on any training path.
#include "attention.h"
#include "dropout.cuh"

namespace tk_attn {
namespace {

constexpr int MASK_THREADS = 256;

__global__ void __launch_bounds__(MASK_THREADS)
dropout_mask_kernel(uint8_t *mask, const int64_t *rng_state, int BH, int T, uint32_t threshold) {
  const int64_t i = int64_t(blockIdx.x) * MASK_THREADS + threadIdx.x;
  const int64_t per_head = int64_t(T) * T;
  if (i >= per_head * BH) return;
  const int bh = int(i / per_head), q = int(i % per_head / T), k = int(i % T);
  const dropout_key d = make_dropout_key(uint64_t(rng_state[0]), uint64_t(rng_state[1]), threshold);
  mask[i] = dropout_keep(d, bh, q, k) ? 1 : 0;
}

}  // namespace

cudaError_t attention_dropout_mask(uint8_t *mask, const int64_t *rng_state, int BH, int T, float p,
                                   cudaStream_t stream) {
  if (BH < 1 || T < 1 || !(p >= 0.f && p < 1.f) || !mask || !rng_state) return cudaErrorInvalidValue;
  const int64_t n = int64_t(BH) * T * T;
  const int64_t blocks = (n + MASK_THREADS - 1) / MASK_THREADS;
  if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
  dropout_mask_kernel<<<unsigned(blocks), MASK_THREADS, 0, stream>>>(mask, rng_state, BH, T, dropout_threshold(p));
  return cudaGetLastError();
}

}  // namespace tk_attn
