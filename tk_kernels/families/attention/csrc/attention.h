// C launcher interface of the attention kernel family.
// The kernel files (forward.cu, backward*.cu, configs.cu) implement these; bindings.cpp calls them.
// No torch headers here or in the kernel files.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace tk_attn {

enum class DType : int { bf16 = 0, fp16 = 1 };

// Strides are in elements. Tensors are (B, H, T, D) with the last dim contiguous
// (stride 1); the other three strides are arbitrary (e.g. views of a fused qkv).
struct Strides {
  int64_t b, h, t;
};

struct FwdParams {
  const void *q, *k, *v;   // (B, H, T, D)
  void *o;                 // (B, H, T, D) output
  float *lse;              // (B, H, T) contiguous fp32 output: natural-log log-sum-exp of scaled scores
  Strides q_s, k_s, v_s, o_s;
  int B, H, T, D;          // D in {64, 128}; T >= 1
  float scale;             // softmax scale (1/sqrt(D) by default)
  bool causal;
  DType dtype;
};

struct BwdParams {
  const void *q, *k, *v, *o, *dout;   // (B, H, T, D)
  const float *lse;                   // (B, H, T) contiguous, from the forward
  void *dq, *dk, *dv;                 // (B, H, T, D) outputs
  float *delta;                       // (B, H, T) contiguous fp32 workspace: rowsum(dO * O)
  float *dq_accum;                    // B * H * dq_accum_rows(T) * D fp32 workspace, zero-filled by the caller
                                      // (its layout is the kernels' business)
  Strides q_s, k_s, v_s, o_s, do_s, dq_s, dk_s, dv_s;
  int B, H, T, D;
  float scale;
  bool causal;
  bool deterministic;                 // true: bitwise-reproducible dQ (no atomics)
  DType dtype;
};

// Rows per head of BwdParams::dq_accum: T rounded up to a multiple of 128 (room for whole query blocks).
constexpr int64_t dq_accum_rows(int64_t T) { return (T + 127) / 128 * 128; }

// Return cudaSuccess or the first CUDA error (launch errors included).
// Unsupported parameters return cudaErrorInvalidValue; callers validate first.
cudaError_t attention_forward(const FwdParams &p, cudaStream_t stream);
cudaError_t attention_backward(const BwdParams &p, cudaStream_t stream);

// Shared memory per block (bytes) that the forward / backward need at least (their smallest
// configurations); a GPU whose opt-in limit per block is smaller cannot run them. The backward picks
// its configuration at launch from the device's limit, capped by $TK_SMEM_LIMIT if set (testing).
int attention_forward_min_smem_bytes();
int attention_backward_min_smem_bytes();
// Shared memory of the dK / dV configuration the backward would launch now on the current device
// for head dim D (in {64, 128}; -1 otherwise or on a CUDA error): which configuration runs, for tests.
int attention_backward_dkdv_smem_bytes(int D, bool deterministic);

}  // namespace tk_attn
