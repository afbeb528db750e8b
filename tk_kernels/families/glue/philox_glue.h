// Torch glue shared by the families' bindings.cpp for their dropout (never by kernel files): the seed and
// offset of one dropout call from PyTorch's default CUDA generator, as a tk::philox_state
// (tk/common/dropout.cuh), and the check of the (2,) int64 rng_state tensor a forward returns.
//
//   tk::philox_state st = tk_glue::next_philox_state(x.device());
//   tk_glue::check_rng_state(rng_state, x.device(), "tk layer_norm");
//
// ATen/cuda/CUDAGeneratorImpl.h needs no CUDA library headers (cuBLAS, cuSPARSE), unlike
// ATen/cuda/CUDAContext.h, so the bindings stay buildable with a minimal CUDA toolkit.
#pragma once
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>

#include "check.h"
#include "common/dropout.cuh"

namespace tk_glue {

// Philox offset increment per dropout call: each call only needs an offset no other call shares (the
// element coordinates fill the rest of the counter); 4 keeps PyTorch's convention that offsets advance
// in multiples of 4.
constexpr uint64_t DROPOUT_OFFSET_INCREMENT = 4;

// The seed and offset of the default CUDA generator of `device` for one dropout call, the way PyTorch's
// fused kernels take them: lock the generator, philox_cuda_state(increment) (advances the offset; under
// CUDA-graph capture it returns pointers plus an intra-graph offset instead of values).
inline tk::philox_state next_philox_state(const c10::Device &device, uint64_t increment = DROPOUT_OFFSET_INCREMENT) {
  auto *gen = at::check_generator<at::CUDAGeneratorImpl>(at::cuda::detail::getDefaultCUDAGenerator(device.index()));
  at::PhiloxCudaState st;
  {
    std::lock_guard<std::mutex> lock(gen->mutex_);
    st = gen->philox_cuda_state(increment);
  }
  tk::philox_state r{};
  r.captured = st.captured_;
  if (st.captured_) {
    r.seed_ptr = st.seed_.ptr;
    r.offset_ptr = st.offset_.ptr;
    r.offset_intragraph = uint64_t(st.offset_intragraph_);
  } else {
    r.seed = st.seed_.val;
    r.offset = st.offset_.val;
  }
  return r;
}

// rng_state must be a contiguous (2,) int64 tensor (seed, offset) on `device`; `who` starts the message.
inline void check_rng_state(const at::Tensor &rng_state, const c10::Device &device, const char *who) {
  TK_CHECK(rng_state.is_cuda() && rng_state.device() == device, who, ": rng_state must be on ", device);
  TK_CHECK(rng_state.scalar_type() == at::kLong && rng_state.dim() == 1 && rng_state.size(0) == 2 &&
               rng_state.is_contiguous(),
           who, ": rng_state must be a contiguous (2,) int64 tensor (seed, offset), got ", rng_state.scalar_type(),
           " of shape ", rng_state.sizes());
}

}  // namespace tk_glue
