// C launcher interface of the attention kernel family.
// The kernel files (forward.cu, backward*.cu, configs.cu) implement these; bindings.cpp calls them.
// No torch headers here or in the kernel files.
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

#include "common/dropout.cuh"

namespace tk_attn {

enum class DType : int { bf16 = 0, fp16 = 1 };

// Strides are in elements. Tensors are (B, H, T, D) with the last dim contiguous
// (stride 1); the other three strides are arbitrary (e.g. views of a fused qkv).
struct Strides {
  int64_t b, h, t;
};

// Seed and offset of the dropout's Philox generator, as PyTorch's CUDA generator hands them out:
// tk::philox_state (tk/common/dropout.cuh; filled by the torch glue, glue/philox_glue.h). Eager: the values.
// Under CUDA-graph capture: pointers to them, read when the kernel runs, and an offset to add (the
// kernel's share of the graph's offset). See dropout.cuh.
using dropout_rng = tk::philox_state;

struct FwdParams {
  const void *q, *k, *v;   // (B, H, T, D)
  void *o;                 // (B, H, T, D) output
  float *lse;              // (B, H, T) contiguous fp32 output: natural-log log-sum-exp of scaled scores
  Strides q_s, k_s, v_s, o_s;
  int B, H, T, D;          // D in {64, 128}; T >= 1
  float scale;             // softmax scale (1/sqrt(D) by default)
  bool causal;
  DType dtype;
  // Dropout on P (dropout_p in [0, 1)); p == 0 runs the kernels without dropout.
  float dropout_p;
  dropout_rng rng;         // p > 0: the generator state to draw from
  int64_t *rng_state;      // p > 0: (2,) int64 device output: the (seed, offset) used
  int *tile_counter;       // attention_forward_hopper: one int32 zero-filled by the caller where
                           // hopper_fwd_dynamic_walk says so, else null
};

// Whether the Hopper forward takes its items from a counter (its CTAs take the next one when they are done): causal
// D = 64 from T = 512 on (session 17, TFLOP/s static -> counter: (32,12,512,64) 224.2 -> 227.0, (16,12,1024,64)
// 291 -> 307, (8,16,2048,64) 352 -> 375, (4,16,4096,64) 392 -> 404-414). Shorter sequences keep the static walk:
// there the counter's zero-fill, a launch of its own, costs more than the balance gains ((64,6,256,64) 123.1 / 124.9
// static, 117.2 with the counter). These were measured with the first form of the pipeline's DYNAMIC hand-off; with
// the merged one (the records' own barriers) (32,12,512,64) measured 223.7 with the counter: T = 512 is even.
inline bool hopper_fwd_dynamic_walk(int64_t T, int64_t D, bool causal) { return causal && D == 64 && T >= 512; }

struct BwdParams {
  const void *q, *k, *v, *o, *dout;   // (B, H, T, D)
  const float *lse;                   // (B, H, T) contiguous, from the forward
  void *dq, *dk, *dv;                 // (B, H, T, D) outputs
  float *delta;                       // (B, H, T) contiguous fp32 workspace: rowsum(dO * O)
                                      // (attention_backward_hopper: B * H * dq_accum_rows(T), padded rows)
  float *lse_log2;                    // attention_backward_hopper only: B * H * dq_accum_rows(T) fp32 workspace
                                      // (lse * log2(e), padded); unused by attention_backward
  float *dq_accum;                    // B * H * dq_accum_rows(T) * D fp32 workspace (its layout is the kernels'
                                      // business): attention_backward needs it zero-filled by the caller,
                                      // attention_backward_hopper zero-fills it itself (any contents)
  int *tile_counter;                  // attention_backward_hopper only: one int32 of workspace (any contents)
  Strides q_s, k_s, v_s, o_s, do_s, dq_s, dk_s, dv_s;
  int B, H, T, D;
  float scale;
  bool causal;
  bool deterministic;                 // true: bitwise-reproducible dQ (no atomics)
  DType dtype;
  float dropout_p;                    // as in the forward; p > 0: regenerate its mask from rng_state
  const int64_t *rng_state;           // p > 0: (2,) int64 device tensor (seed, offset) the forward wrote
  float *dbias;                       // attention_backward_hopper, p = 0 only, optional: the gradient of the bias of
                                      // the fused projection q, k, v are views of (3 H D fp32: [d b_q | 0 | d b_v],
                                      // qkv_bias_grad.cuh), summed by the backward's row passes; nullptr: none
  float *bias_partial;                // with dbias: 2 * qkv_bias_partial_rows(*this) * H * D floats of workspace
};

// Dropout threshold of probability p in [0, 1): keep iff a 16-bit uniform >= round(p * 2^16)
// (capped at 2^16 - 1, so every p < 1 keeps something): tk/common/dropout.cuh.
using tk::dropout_threshold;

// Rows per head of BwdParams::dq_accum: T rounded up to a multiple of 128 (room for whole query blocks).
constexpr int64_t dq_accum_rows(int64_t T) { return (T + 127) / 128 * 128; }

// Rows of column partials each row pass of the Hopper backward leaves for BwdParams::dbias: one a CTA of
// 256 / (D / 8) rows, over the B * H heads' dq_accum_rows(T) rows (the heads side by side in a partial row).
constexpr int64_t qkv_bias_partial_rows(const BwdParams &p) { return p.B * dq_accum_rows(p.T) / (2048 / p.D); }

// Return cudaSuccess or the first CUDA error (launch errors included).
// Unsupported parameters return cudaErrorInvalidValue; callers validate first.
cudaError_t attention_forward(const FwdParams &p, cudaStream_t stream);
cudaError_t attention_backward(const BwdParams &p, cudaStream_t stream);
// The sm_90a forward (hopper_forward.cu: wgmma + TMA, warp-specialised): the same outputs as
// attention_forward, dropout included (the same keep mask for the same rng). Launch it only on an
// sm_90 GPU with a library built for sm_90a (elsewhere the kernel traps); ops.py decides. A tensor map the
// driver rejects returns cudaErrorInvalidValue with the driver's reason in *why (when given).
cudaError_t attention_forward_hopper(const FwdParams &p, cudaStream_t stream, const char **why = nullptr);
// The sm_90a backward (hopper_backward.cu): the same dq, dk, dv as attention_backward for
// deterministic == false, dropout included (deterministic: cudaErrorInvalidValue). Its workspaces differ: delta and
// lse_log2 hold B * H * dq_accum_rows(T) floats each, dq_accum B * H * dq_accum_rows(T) * D floats of any
// contents (its prep kernel zero-fills them). Same launch conditions and *why as attention_forward_hopper.
cudaError_t attention_backward_hopper(const BwdParams &p, cudaStream_t stream, const char **why = nullptr);

// Shared memory per block (bytes) that the forward / backward need at least (their smallest
// configurations); a GPU whose opt-in limit per block is smaller cannot run them. The backward picks
// its configuration at launch from the device's limit, capped by $TK_SMEM_LIMIT if set (testing).
int attention_forward_min_smem_bytes();
int attention_backward_min_smem_bytes();
// Shared memory of the dK / dV configuration the backward would launch now on the current device
// for head dim D (in {64, 128}; -1 otherwise or on a CUDA error): which configuration runs, for tests.
int attention_backward_dkdv_smem_bytes(int D, bool deterministic);

// Debug: mask[bh][q][k] = 1 if the dropout of probability p with the (seed, offset) in rng_state
// ((2,) int64 on the device) keeps element (q, k) of head bh, else 0; mask is BH x T x T uint8.
cudaError_t attention_dropout_mask(uint8_t *mask, const int64_t *rng_state, int BH, int T, float p,
                                   cudaStream_t stream);

}  // namespace tk_attn
