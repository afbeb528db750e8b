// Attention backward: the ONE table of dK / dV configurations and the ONE function that picks from it.
// Used by the launcher (backward.cu) and by the query the tests call
// (attention_backward_dkdv_smem_bytes, attention.h). What varies at run time is only the device's
// opt-in shared memory per block (capped by $TK_SMEM_LIMIT for testing), whether it is sm_90+ (TMA
// bulk reductions exist) and whether the caller asked for deterministic dQ.
#pragma once
#include <cuda_runtime.h>

namespace tk_attn {

enum class dkdv_kernel {
  transposed,         // bwd_dkdv_kernel (backward_dkdv.cu)
  split_two_barrier,  // bwd_dkdv_split_kernel, two barriers per query block (backward_dkdv_split.cu)
  split_one_barrier,  // bwd_dkdv_split_kernel, one barrier per query block (3 query buffers)
};
enum class dq_mode {
  none,     // deterministic: the dK / dV kernel writes no dQ; bwd_dq_kernel computes it afterwards
  red_add,  // dQ partials added into a row-major dq_accum with fp32 red.add
  bulk,     // dQ partials staged in shared memory, added by TMA bulk reductions (sm_90+), xor32 dq_accum
};

struct dkdv_launch {
  int D;
  dkdv_kernel kernel;
  int block_m;      // queries per block
  dq_mode dq;
  int smem_bytes;   // dynamic shared memory per CTA
  bool dropout;     // has a dropout variant (DROPOUT kernels; all but one, whose dropout variant spilled)
};

// The configuration to run for head dim D (64 / 128): the first entry of the table, in order, for this
// D and determinism (and, with dropout, having a dropout variant) whose dQ mode the device has and whose
// shared memory fits `budget`; if none fits, the smallest one (which then fails to launch with a CUDA
// error). nullptr for an unsupported D.
const dkdv_launch *select_dkdv(int D, bool deterministic, int budget, bool sm90, bool dropout = false);

// The current device's shared-memory budget per block (opt-in limit, capped by a positive $TK_SMEM_LIMIT,
// read on every call) and whether it is sm_90+.
cudaError_t device_budget(int &bytes, bool &sm90);

}  // namespace tk_attn
