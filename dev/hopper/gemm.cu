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
#include "warpgroup/sync.cuh"
#include "thread/bulk.cuh"
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


// ---------------------------------------------------------------------------------------------
// Version 2: persistent, with a shared-memory + TMA-store epilogue.
//
// gridDim.x = min(#SMs, #tiles) CTAs walk the tiles t = blockIdx.x, + gridDim.x, ... (n fastest,
// so neighbouring CTAs share A's rows). The producer runs one K-slice ring across all of its
// CTA's tiles, so while the consumers store one tile it already loads the next tile's first
// STAGES slices. Each consumer writes its 64 x BN fp32 accumulator as bf16 into one of two 8 KB
// 128B-swizzled staging buffers, 64 columns at a time, and its thread 0 hands each buffer to a
// TMA store (rows past M are dropped by TMA). Shared memory at BN=256: 4 x 48 KB ring + 2 x 2 x
// 8 KB staging + 1 KB alignment = 225 KB.
constexpr int C_BOX = 64;                       // staging buffer: 64 rows x 64 columns of bf16
constexpr int C_BOX_BYTES = 64 * C_BOX * 2;     // 8 KB, one 128B-swizzled TMA box

template <int BN>
struct layout2 {
  static constexpr int A_BYTES = BM * BK * 2;
  static constexpr int B_BYTES = BN * BK * 2;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int RING_BYTES = STAGES * STAGE_BYTES;
  static constexpr int SMEM_BYTES = RING_BYTES + 2 * 2 * C_BOX_BYTES + 1024;
};

// Byte offset of element (row, col) of a [64 x 64] bf16 tile in the 128-byte swizzle TMA uses:
// 16-byte chunk c of row r lands in chunk c ^ (r % 8).
__device__ __forceinline__ int swizzle128_offset(int row, int col) {
  int chunk = (col * 2) >> 4;
  return row * 128 + ((chunk ^ (row & 7)) << 4) + ((col * 2) & 15);
}

template <int BN>
__global__ void __launch_bounds__(384, 1)
gemm_persistent_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                       const __grid_constant__ CUtensorMap c_map, int M, int N, int K) {
  using L = layout2<BN>;
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

  const int k_tiles = K / BK, tiles_n = N / BN, tiles = ((M + BM - 1) / BM) * tiles_n;
  const int wg = tk::wg::warpgroupid();
  if (wg == 0) {
    tk::wg::set_max_registers<40>();
    if (tk::wg::warpgroup_thread() == 0) {
      int g = 0;  // K slices issued so far by this CTA: ring slot g % STAGES, pass g / STAGES
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        int m0 = (t / tiles_n) * BM, n0 = (t % tiles_n) * BN;
        for (int kt = 0; kt < k_tiles; kt++, g++) {
          int s = g % STAGES;
          tk::wait(empty[s], ((g / STAGES) & 1) ^ 1);
          tk::expect_bytes(full[s], L::STAGE_BYTES);
          tk::tma::load_async(a_tile(s), a_map, full[s], kt * BK, m0);
          tk::tma::load_async(b_tile(s), b_map, full[s], kt * BK, n0);
        }
      }
    }
    return;
  }

  tk::wg::set_max_registers<232>();
  const int consumer = wg - 1, me = tk::wg::warpgroup_thread();
  char *staging = base + L::RING_BYTES + consumer * 2 * C_BOX_BYTES;
  tk::wg::accumulator<BN> acc;
  int g = 0, stores = 0;
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    int m0 = (t / tiles_n) * BM, n0 = (t % tiles_n) * BN;
    for (int kt = 0; kt < k_tiles; kt++, g++) {
      int s = g % STAGES;
      tk::wait(full[s], (g / STAGES) & 1);
      tk::wg::mma_fence(acc.v);
      uint64_t da = tk::wg::desc_k128(a_tile(s) + consumer * 64 * BK * 2);
      uint64_t db = tk::wg::desc_k128(b_tile(s));
#pragma unroll
      for (int k = 0; k < BK / 16; k++)
        tk::wg::wgmma_ss<bf16, BN>(acc.v, tk::wg::desc_advance_k(da, k), tk::wg::desc_advance_k(db, k),
                                   kt > 0 || k > 0);
      tk::wg::mma_commit();
      tk::wg::mma_wait<1>(acc.v);  // the group of the slice before is done: free its slot
      if (kt > 0 && me == 0) tk::arrive(empty[(g - 1) % STAGES]);
    }
    tk::wg::mma_wait<0>(acc.v);
    if (me == 0) tk::arrive(empty[(g - 1) % STAGES]);

    // epilogue: 64 columns at a time through the two staging buffers
#pragma unroll
    for (int cb = 0; cb < BN / C_BOX; cb++, stores++) {
      char *buf = staging + (stores & 1) * C_BOX_BYTES;
      if (me == 0) tk::bulk_wait_group_read<1>();  // the store that last read `buf` is done with it
      tk::wg::sync(1 + consumer);
#pragma unroll
      for (int j = 0; j < C_BOX / 8; j++) {
        int i = 4 * (cb * C_BOX / 8 + j);
        int row = acc.row(i), col = acc.col(i) - cb * C_BOX;
        *reinterpret_cast<__nv_bfloat162 *>(buf + swizzle128_offset(row, col)) =
            __floats2bfloat162_rn(acc.v[i], acc.v[i + 1]);
        *reinterpret_cast<__nv_bfloat162 *>(buf + swizzle128_offset(row + 8, col)) =
            __floats2bfloat162_rn(acc.v[i + 2], acc.v[i + 3]);
      }
      tk::fence_proxy_async_shared();
      tk::wg::sync(1 + consumer);
      if (me == 0) {
        tk::tma::store_async(c_map, buf, n0 + cb * C_BOX, m0 + consumer * 64);
        tk::bulk_commit_group();
      }
    }
  }
  if (me == 0) tk::bulk_wait_group<0>();
}

template <int BN>
void launch_persistent(const torch::Tensor &a, const torch::Tensor &b, torch::Tensor &c) {
  int M = a.size(0), K = a.size(1), N = b.size(0);
  auto a_map = tk::host::matrix_map<bf16>(a.data_ptr(), M, K, a.stride(0), BM, BK, 128);
  auto b_map = tk::host::matrix_map<bf16>(b.data_ptr(), N, K, b.stride(0), BN, BK, 128);
  auto c_map = tk::host::matrix_map<bf16>(c.data_ptr(), M, N, c.stride(0), 64, C_BOX, 128);
  auto kernel = gemm_persistent_kernel<BN>;
  int smem = layout2<BN>::SMEM_BYTES, device, sms;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int tiles = ((M + BM - 1) / BM) * (N / BN);
  kernel<<<std::min(sms, tiles), 384, smem, c10::cuda::getCurrentCUDAStream().stream()>>>(a_map, b_map, c_map, M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor gemm(const torch::Tensor &a, const torch::Tensor &b, int64_t bn, int64_t version) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == at::kBFloat16 && b.scalar_type() == at::kBFloat16,
              "bf16 CUDA tensors");
  TORCH_CHECK(a.stride(1) == 1 && b.stride(1) == 1 && a.size(1) == b.size(1), "A [M, K], B [N, K], row-major");
  TORCH_CHECK(a.size(1) % BK == 0 && b.size(0) % bn == 0, "K % 64 == 0 and N % BN == 0");
  auto c = torch::empty({a.size(0), b.size(0)}, a.options());
  TORCH_CHECK(bn == 128 || bn == 256, "BN must be 128 or 256");
  TORCH_CHECK(version == 1 || version == 2, "version 1 (one CTA per tile) or 2 (persistent)");
  if (version == 1) bn == 128 ? launch<128>(a, b, c) : launch<256>(a, b, c);
  else bn == 128 ? launch_persistent<128>(a, b, c) : launch_persistent<256>(a, b, c);
  return c;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("gemm", &gemm, "C = A B^T (bf16, Hopper wgmma)"); }
