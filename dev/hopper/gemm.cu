// dev/: first Hopper GEMM on the DSL's warpgroup / TMA / mbarrier layer (not shipped).
//
// C[M x N] = A[M x K] * B[N x K]^T (nn.Linear's x W^T), bf16 in, fp32 accumulate, bf16 out.
// One CTA per 128 x BN output tile, three warpgroups: warpgroup 0 is the producer (one thread
// issues the TMA loads of a STAGES-deep ring of 64-wide K slices, 40 registers), warpgroups 1 and 2
// are consumers (64 rows each, m64nBNk16 wgmma from shared memory, 232 registers). Each ring slot
// has a "full" barrier (TMA bytes landed) and an "empty" one (both consumers done with it). A
// consumer keeps one wgmma group in flight and frees the slot of the group before. Requirements
// of this first version: K % 64 == 0, N % BN == 0; M is any (TMA zero-fills, the store is guarded).
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>

#include "thread/mbarrier.cuh"
#include "thread/tma.cuh"
#include "warpgroup/mma.cuh"
#include "host/tensor_map.cuh"

namespace {

using bf16 = __nv_bfloat16;
constexpr int BM = 128, BK = 64, STAGES = 4;

template <int BN>
struct layout {
  static constexpr int A_BYTES = BM * BK * 2;
  static constexpr int B_BYTES = BN * BK * 2;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;  // + alignment slack
};

template <int BN>
__global__ void __launch_bounds__(384, 1)
gemm_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
            bf16 *__restrict__ c, int M, int N, int K) {
  using L = layout<BN>;
  extern __shared__ char smem_raw[];
  char *base = smem_raw + ((1024 - (tk::smem_u32(smem_raw) & 1023)) & 1023);
  __shared__ tk::barrier full[STAGES], empty[STAGES];
  auto a_tile = [&](int s) { return base + s * L::STAGE_BYTES; };
  auto b_tile = [&](int s) { return base + s * L::STAGE_BYTES + L::A_BYTES; };

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; s++) {
      tk::init(full[s], 1);
      tk::init(empty[s], 2);
    }
    tk::fence_barrier_init();
  }
  __syncthreads();

  const int k_tiles = K / BK, m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int wg = tk::wg::warpgroupid();
  if (wg == 0) {
    tk::wg::set_max_registers<40>();
    if (tk::wg::warpgroup_thread() == 0) {
      for (int kt = 0; kt < k_tiles; kt++) {
        int s = kt % STAGES, pass = kt / STAGES;
        tk::wait(empty[s], (pass & 1) ^ 1);
        tk::expect_bytes(full[s], L::STAGE_BYTES);
        tk::tma::load_async(a_tile(s), a_map, full[s], kt * BK, m0);
        tk::tma::load_async(b_tile(s), b_map, full[s], kt * BK, n0);
      }
    }
    return;
  }

  tk::wg::set_max_registers<232>();
  const int consumer = wg - 1;
  tk::wg::accumulator<BN> acc;
#pragma unroll
  for (int i = 0; i < acc.REGS; i++) acc.v[i] = 0.f;
  for (int kt = 0; kt < k_tiles; kt++) {
    int s = kt % STAGES, pass = kt / STAGES;
    tk::wait(full[s], pass & 1);
    tk::wg::mma_fence(acc.v);
    uint64_t da = tk::wg::desc_k128(a_tile(s) + consumer * 64 * BK * 2);
    uint64_t db = tk::wg::desc_k128(b_tile(s));
#pragma unroll
    for (int k = 0; k < BK / 16; k++)
      tk::wg::wgmma_ss<bf16, BN>(acc.v, tk::wg::desc_advance_k(da, k), tk::wg::desc_advance_k(db, k), 1);
    tk::wg::mma_commit();
    tk::wg::mma_wait<1>(acc.v);  // the group of kt - 1 is done: its slot is free
    if (kt > 0 && tk::wg::warpgroup_thread() == 0) tk::arrive(empty[(kt - 1) % STAGES]);
  }
  tk::wg::mma_wait<0>(acc.v);

#pragma unroll
  for (int i = 0; i < acc.REGS; i += 2) {
    int row = m0 + consumer * 64 + acc.row(i), col = n0 + acc.col(i);
    if (row < M)
      *reinterpret_cast<__nv_bfloat162 *>(c + size_t(row) * N + col) = __floats2bfloat162_rn(acc.v[i], acc.v[i + 1]);
  }
}

template <int BN>
void launch(const torch::Tensor &a, const torch::Tensor &b, torch::Tensor &c) {
  int M = a.size(0), K = a.size(1), N = b.size(0);
  auto a_map = tk::host::matrix_map<bf16>(a.data_ptr(), M, K, a.stride(0), BM, BK, 128);
  auto b_map = tk::host::matrix_map<bf16>(b.data_ptr(), N, K, b.stride(0), BN, BK, 128);
  auto kernel = gemm_kernel<BN>;
  int smem = layout<BN>::SMEM_BYTES;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  dim3 grid(N / BN, (M + BM - 1) / BM);
  kernel<<<grid, 384, smem, c10::cuda::getCurrentCUDAStream().stream()>>>(
      a_map, b_map, reinterpret_cast<bf16 *>(c.data_ptr()), M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor gemm(const torch::Tensor &a, const torch::Tensor &b, int64_t bn) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == at::kBFloat16 && b.scalar_type() == at::kBFloat16,
              "bf16 CUDA tensors");
  TORCH_CHECK(a.stride(1) == 1 && b.stride(1) == 1 && a.size(1) == b.size(1), "A [M, K], B [N, K], row-major");
  TORCH_CHECK(a.size(1) % BK == 0 && b.size(0) % bn == 0, "K % 64 == 0 and N % BN == 0");
  auto c = torch::empty({a.size(0), b.size(0)}, a.options());
  if (bn == 128) launch<128>(a, b, c);
  else if (bn == 256) launch<256>(a, b, c);
  else TORCH_CHECK(false, "BN must be 128 or 256");
  return c;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("gemm", &gemm, "C = A B^T (bf16, Hopper wgmma)"); }
