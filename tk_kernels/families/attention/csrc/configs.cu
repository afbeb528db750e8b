// The dK / dV configuration table of the attention backward (see configs.cuh) and its selection.
#include <cstdlib>

#include "backward.cuh"
#include "configs.cuh"

namespace tk_attn {
namespace {

// Shared memory of each layout (both dtypes have 16-bit elements, so bf16 stands for both).
constexpr int transposed_bytes = dkdv_smem<bf16, 64>::bytes;                          // 166,016
constexpr int transposed_bulk_bytes = dkdv_smem<bf16, 64>::bytes_bulk;                // 198,784 (+ 32 KB staging)
constexpr int small64_bytes = dkdv_smem<bf16, 64, dkdv_small_block_m<64>>::bytes;     //  99,456
constexpr int small128_bytes = dkdv_smem<bf16, 128, dkdv_small_block_m<128>>::bytes;  //  90,496
constexpr int split_one_bar_bytes = split_smem<bf16, 128, true>::bytes;               // 231,040 (staged bulk: same)
constexpr int split_bytes = split_smem<bf16, 128, false>::bytes;                      // 164,992
constexpr int split_bulk_bytes = split_smem<bf16, 128, false>::bytes_bulk;            // 197,760 (+ 32 KB staging)
static_assert(split_smem<bf16, 128, true>::bytes_bulk == split_one_bar_bytes, "staged bulk dQ needs no extra smem");

using K = dkdv_kernel;
using Q = dq_mode;
// In order of preference per (D, deterministic): H100 / H200 run the first bulk entry, A100 the first
// red_add entry, 99 KB GPUs (RTX 30xx / 40xx, sm_86 / sm_89: 101,376 B) the small ones.
constexpr dkdv_launch CONFIGS[] = {
    // D = 64: the transposed kernel, 128-query blocks; 64-query blocks on 99 KB GPUs
    {64, K::transposed, 128, Q::bulk, transposed_bulk_bytes, true},
    {64, K::transposed, 128, Q::red_add, transposed_bytes, true},
    {64, K::transposed, 128, Q::none, transposed_bytes, true},
    {64, K::transposed, 64, Q::red_add, small64_bytes, true},
    {64, K::transposed, 64, Q::none, small64_bytes, true},
    // D = 128: the split kernel, 64-query blocks; the transposed kernel with 16-query blocks on 99 KB GPUs
    // dropout = false: the split kernel's dropout variants with these dQ modes spilled (the red_add ones 88
    // bytes on sm_80, the two-barrier bulk one 16 bytes on sm_90a), so with dropout an A100 (and a budget
    // below 225 KB on sm_90) runs the transposed kernel's 16-query configuration at D = 128
    {128, K::split_one_barrier, 64, Q::bulk, split_one_bar_bytes, true},
    {128, K::split_one_barrier, 64, Q::red_add, split_one_bar_bytes, false},
    {128, K::split_two_barrier, 64, Q::bulk, split_bulk_bytes, false},
    {128, K::split_two_barrier, 64, Q::red_add, split_bytes, false},
    {128, K::split_two_barrier, 64, Q::none, split_bytes, true},
    {128, K::transposed, 16, Q::red_add, small128_bytes, true},
    {128, K::transposed, 16, Q::none, small128_bytes, true},
};

constexpr int SMALL_GPU_SMEM = 101376;  // opt-in shared memory per block of sm_86 / sm_89 GPUs (99 KB)

// The most shared memory per block the backward needs in its smallest configurations.
constexpr int bwd_min_smem_bytes() {
  int m = 0;
  for (int b : {small64_bytes, small128_bytes, dq_smem<bf16, 64>::bytes, dq_smem<bf16, 128>::bytes}) m = b > m ? b : m;
  return m;
}
static_assert(bwd_min_smem_bytes() <= SMALL_GPU_SMEM, "the small configurations must fit 99 KB GPUs");

}  // namespace

const dkdv_launch *select_dkdv(int D, bool deterministic, int budget, bool sm90, bool dropout) {
  const dkdv_launch *last = nullptr;
  for (const dkdv_launch &c : CONFIGS) {
    if (c.D != D || (c.dq == dq_mode::none) != deterministic || (dropout && !c.dropout)) continue;
    last = &c;
    if (c.dq == dq_mode::bulk && !sm90) continue;
    if (c.smem_bytes <= budget) return &c;
  }
  return last;
}

cudaError_t device_budget(int &bytes, bool &sm90) {
  int dev = 0, major = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  if ((err = cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) != cudaSuccess) return err;
  if ((err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess) return err;
  sm90 = major >= 9;
  if (const char *env = std::getenv("TK_SMEM_LIMIT")) {
    const long cap = std::strtol(env, nullptr, 10);
    if (cap > 0 && cap < bytes) bytes = int(cap);
  }
  return cudaSuccess;
}

int attention_backward_min_smem_bytes() { return bwd_min_smem_bytes(); }

int attention_backward_dkdv_smem_bytes(int D, bool deterministic) {
  int budget = 0;
  bool sm90 = false;
  if (device_budget(budget, sm90) != cudaSuccess) return -1;
  const dkdv_launch *c = select_dkdv(D, deterministic, budget, sm90);
  return c ? c->smem_bytes : -1;
}

}  // namespace tk_attn
