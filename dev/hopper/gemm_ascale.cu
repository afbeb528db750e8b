// dev/: does a GEMM whose A operand is scaled per (row, 256-column block of K) on its way from shared memory
// lose speed against the plain GEMM? (not shipped; the question behind the fused-classifier design of dev/README's
// "Leads after session 25": dx = G W with G = s(row, tile) E - onehot, E the logits GEMM's exp(L - m_tile).)
//
// C[M x N] = A'[M x K] B[N x K]^T, bf16 in, fp32 accumulate, bf16 out, with three consumer mainloops:
//   MODE 0  wgmma with A and B from shared memory (SS): the baseline, dev/hopper/gemm.cu's version 2
//   MODE 1  A from registers (RS): per K slice, 4 ldmatrix.x4 of the consumer's 64 rows of the swizzled A tile
//           (tk::wg::load_a_fragment, the inverse of store_a_fragment), then 4 wgmma_rs
//   MODE 2  MODE 1 with A' = bf16(A * s[row][k / 256]): one bf16x2 multiply per fragment register before the
//           wgmma (registers 0 / 2 hold row g, 1 / 3 row g + 8 of the warp's 16 rows; s read per slice)
//   MODE 3  the classifier's dW form: A stored MN-major (given as A^T, (K, M)), loaded as two [64 K x 64 M] boxes,
//           its fragments by ldmatrix.trans, scaled per K column by s[m / 256][k] (the scale of a vocabulary block
//           for token k): A' = bf16(A * s[m / 256][k]), bf16x2 pairs of consecutive k per register
// The RS modes keep two fragment sets in flight, alternated by slice parity (the loop is unrolled by two so
// that the choice is compile-time): the set a slice's wgmmas read stays live until the wait that retires them
// (pin_registers), the hazard that gave session 12's register-A classifier GEMM wrong results.
// Persistent grid, 4-stage ring of 128 x 64 A / BN x 64 B slices, TMA, 3 warpgroups (producer + 2 consumers of 64
// rows), epilogue straight from registers (bf16 pairs; this experiment is about the mainloop). Requirements:
// K % 64 == 0, N % BN == 0, any M. Build and time: python dev/hopper/check_gemm_ascale.py (an sm_90 GPU).
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_bf16.h>

#include "host/tensor_map.cuh"
#include "thread/mbarrier.cuh"
#include "thread/tma.cuh"
#include "warpgroup/mma.cuh"
#include "warpgroup/sync.cuh"

namespace {

using bf16 = __nv_bfloat16;
constexpr int BM = 128, BK = 64, STAGES = 4, SCALE_COLS = 256;

template <int BN>
struct layout {
  static constexpr int A_BYTES = BM * BK * 2;
  static constexpr int B_BYTES = BN * BK * 2;
  static constexpr int STAGE_BYTES = A_BYTES + B_BYTES;
  static constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 1024;  // + alignment slack
};

__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t s) {
  __nv_bfloat162 x, y;
  memcpy(&x, &a, 4);
  memcpy(&y, &s, 4);
  x = __hmul2(x, y);
  uint32_t r;
  memcpy(&r, &x, 4);
  return r;
}

// frag's registers times the bf16x2 scales s0 .. s3 (register i by s_i)
__device__ __forceinline__ void scale_fragment(tk::wg::a_fragment<bf16> &frag, uint32_t s0, uint32_t s1, uint32_t s2,
                                               uint32_t s3) {
  frag.r[0] = mul_bf16x2(frag.r[0], s0);
  frag.r[1] = mul_bf16x2(frag.r[1], s1);
  frag.r[2] = mul_bf16x2(frag.r[2], s2);
  frag.r[3] = mul_bf16x2(frag.r[3], s3);
}

template <int BN, int MODE>
struct Consumer {
  using frags = tk::wg::a_fragment<bf16>[BK / 16];
  tk::wg::accumulator<BN> acc;
  const float *scale;  // MODE 2: (M, K / 256) fp32
  int M, K, consumer;

  // One K slice: A from shared memory (MODE 0) or from the fragment set f (MODE 1, 2), B from shared memory; the
  // group is committed, not waited for.
  __device__ void issue(const char *a_tile, const char *b_tile, int m0, int kt, bool first, frags &f) {
    const uint64_t db = tk::wg::desc_k128(b_tile);
    if constexpr (MODE == 0) {
      const uint64_t da = tk::wg::desc_k128(a_tile + consumer * 64 * BK * 2);
      tk::wg::mma_fence(acc.v);
#pragma unroll
      for (int k = 0; k < BK / 16; k++)
        tk::wg::wgmma_ss<bf16, BN>(acc.v, tk::wg::desc_advance_k(da, k), tk::wg::desc_advance_k(db, k), !first || k > 0);
    } else {
      const char *a = a_tile + consumer * 64 * BK * 2;  // this consumer's rows (MODE 3: its [64 K x 64 M] box)
      if constexpr (MODE == 3) {
        const int t = threadIdx.x & 3;
        const float *sk = scale + int64_t(m0 / SCALE_COLS) * K + kt * BK;  // s[m / 256][k] of this slice's 64 k
#pragma unroll
        for (int k = 0; k < BK / 16; k++) {
          tk::wg::load_a_fragment_mn(f[k], a, k);
          const float2 lo = *reinterpret_cast<const float2 *>(sk + 16 * k + 2 * t);      // k = 16 k + 2 t, + 1
          const float2 hi = *reinterpret_cast<const float2 *>(sk + 16 * k + 8 + 2 * t);  // k + 8
          const uint32_t slo = tk::wg::pack2<bf16>(lo.x, lo.y), shi = tk::wg::pack2<bf16>(hi.x, hi.y);
          scale_fragment(f[k], slo, slo, shi, shi);  // registers 0, 1: k = 2 t, 2 t + 1; 2, 3: k + 8
        }
      } else {
#pragma unroll
        for (int k = 0; k < BK / 16; k++) tk::wg::load_a_fragment(f[k], a, k);
        if constexpr (MODE == 2) {
          const int lane = threadIdx.x & 31, warp = (threadIdx.x >> 5) & 3;
          const int r = m0 + consumer * 64 + 16 * warp + lane / 4, col = kt * BK / SCALE_COLS, cols = K / SCALE_COLS;
          const float s0 = r < M ? scale[int64_t(r) * cols + col] : 0.f;
          const float s1 = r + 8 < M ? scale[int64_t(r + 8) * cols + col] : 0.f;
          const uint32_t lo = tk::wg::pack2<bf16>(s0, s0), hi = tk::wg::pack2<bf16>(s1, s1);
#pragma unroll
          for (int k = 0; k < BK / 16; k++) scale_fragment(f[k], lo, hi, lo, hi);
        }
      }
      tk::wg::mma_fence(acc.v);  // after the fragments' last writes (PTX: wgmma.fence between them and the wgmma)
#pragma unroll
      for (int k = 0; k < BK / 16; k++)
        tk::wg::wgmma_rs<bf16, BN, false>(acc.v, f[k].r, tk::wg::desc_advance_k(db, k), !first || k > 0);
    }
    tk::wg::mma_commit();
  }
};

template <int BN, int MODE>
__global__ void __launch_bounds__(384, 1)
gemm_ascale_kernel(const __grid_constant__ CUtensorMap a_map, const __grid_constant__ CUtensorMap b_map,
                   bf16 *__restrict__ c, const float *__restrict__ scale, int M, int N, int K) {
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

  const int k_tiles = K / BK, tiles_n = N / BN, tiles = ((M + BM - 1) / BM) * tiles_n;
  const int wg = tk::wg::warpgroupid();
  if (wg == 0) {  // the producer: one thread loads every slice of the CTA's tiles into the ring
    tk::wg::set_max_registers<40>();
    if (tk::wg::warpgroup_thread() == 0) {
      int g = 0;
      for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const int m0 = (t / tiles_n) * BM, n0 = (t % tiles_n) * BN;
        for (int kt = 0; kt < k_tiles; kt++, g++) {
          const int s = g % STAGES;
          tk::wait(empty[s], ((g / STAGES) & 1) ^ 1);
          tk::expect_bytes(full[s], L::STAGE_BYTES);
          if constexpr (MODE == 3) {  // A^T (K, M): two [64 K x 64 M] boxes side by side
            for (int j = 0; j < BM / 64; j++) tk::tma::load_async(a_tile(s) + j * 64 * BK * 2, a_map, full[s], m0 + 64 * j, kt * BK);
          } else {
            tk::tma::load_async(a_tile(s), a_map, full[s], kt * BK, m0);
          }
          tk::tma::load_async(b_tile(s), b_map, full[s], kt * BK, n0);
        }
      }
    }
    return;
  }

  tk::wg::set_max_registers<232>();
  const int me = tk::wg::warpgroup_thread();
  Consumer<BN, MODE> cons{{}, scale, M, K, wg - 1};
  typename Consumer<BN, MODE>::frags f0, f1;  // MODE 1, 2: the fragment sets of even and odd slices
  int g = 0;
  // slice kt of the tile on ring slot g: issue it with set f, then retire the slice before it (wait<1>) and
  // free that slot; `prev` (the other set) was read by the retired slice and is pinned until here
  auto slice = [&](int m0, int kt, typename Consumer<BN, MODE>::frags &f, typename Consumer<BN, MODE>::frags &prev) {
    const int s = g % STAGES;
    tk::wait(full[s], (g / STAGES) & 1);
    cons.issue(a_tile(s), b_tile(s), m0, kt, kt == 0, f);
    tk::wg::mma_wait<1>(cons.acc.v);
    if constexpr (MODE != 0) {
#pragma unroll
      for (int k = 0; k < BK / 16; k++) tk::wg::pin_registers(prev[k].r);
    }
    if (kt > 0 && me == 0) tk::arrive(empty[(g - 1) % STAGES]);
    g++;
  };
  for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int m0 = (t / tiles_n) * BM, n0 = (t % tiles_n) * BN;
    int kt = 0;
    for (; kt + 1 < k_tiles; kt += 2) {
      slice(m0, kt, f0, f1);
      slice(m0, kt + 1, f1, f0);
    }
    if (kt < k_tiles) slice(m0, kt, f0, f1);
    tk::wg::mma_wait<0>(cons.acc.v);
    if constexpr (MODE != 0) {
#pragma unroll
      for (int k = 0; k < BK / 16; k++) {
        tk::wg::pin_registers(f0[k].r);
        tk::wg::pin_registers(f1[k].r);
      }
    }
    if (me == 0) tk::arrive(empty[(g - 1) % STAGES]);
#pragma unroll
    for (int i = 0; i < cons.acc.REGS; i += 2) {
      const int row = m0 + cons.consumer * 64 + cons.acc.row(i), col = n0 + cons.acc.col(i);
      if (row < M)
        *reinterpret_cast<__nv_bfloat162 *>(c + size_t(row) * N + col) =
            __floats2bfloat162_rn(cons.acc.v[i], cons.acc.v[i + 1]);
    }
  }
}

template <int BN, int MODE>
void launch(const torch::Tensor &a, const torch::Tensor &b, torch::Tensor &c, const float *scale) {
  // (MODE 3: a is A^T, (K, M))
  const int M = MODE == 3 ? a.size(1) : a.size(0), K = MODE == 3 ? a.size(0) : a.size(1), N = b.size(0);
  const auto a_map = MODE == 3 ? tk::host::matrix_map<bf16>(a.data_ptr(), K, M, a.stride(0), BK, 64, 128)
                               : tk::host::matrix_map<bf16>(a.data_ptr(), M, K, a.stride(0), BM, BK, 128);
  const auto b_map = tk::host::matrix_map<bf16>(b.data_ptr(), N, K, b.stride(0), BN, BK, 128);
  auto kernel = gemm_ascale_kernel<BN, MODE>;
  const int smem = layout<BN>::SMEM_BYTES;
  int device, sms;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const int tiles = ((M + BM - 1) / BM) * (N / BN);
  kernel<<<std::min(sms, tiles), 384, smem, c10::cuda::getCurrentCUDAStream().stream()>>>(
      a_map, b_map, reinterpret_cast<bf16 *>(c.data_ptr()), scale, M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// c = A' b^T: modes 0 / 1 A' = a, mode 2 a scaled per (row, 256-column block) by scale (M, K / 256); mode 3 a is A^T
// (K, M) and A' = A scaled per (256-row block, column) by scale (ceil(M / 256), K).
torch::Tensor gemm(const torch::Tensor &a, const torch::Tensor &b, const torch::Tensor &scale, int64_t mode) {
  TORCH_CHECK(a.is_cuda() && b.is_cuda() && a.scalar_type() == at::kBFloat16 && b.scalar_type() == at::kBFloat16,
              "bf16 CUDA tensors");
  TORCH_CHECK(mode >= 0 && mode <= 3, "mode 0 (SS), 1 (RS), 2 (RS, A scaled per row) or 3 (A^T, scaled per k)");
  const int64_t M = mode == 3 ? a.size(1) : a.size(0), K = mode == 3 ? a.size(0) : a.size(1);
  TORCH_CHECK(a.stride(1) == 1 && b.stride(1) == 1 && K == b.size(1), "A [M, K] (mode 3: A^T [K, M]), B [N, K]");
  TORCH_CHECK(K % SCALE_COLS == 0 && b.size(0) % 256 == 0 && (mode != 3 || M % 64 == 0),
              "K % 256 == 0, N % 256 == 0 (mode 3: M % 64 == 0)");
  const int64_t s_rows = mode == 3 ? (M + SCALE_COLS - 1) / SCALE_COLS : M, s_cols = mode == 3 ? K : K / SCALE_COLS;
  TORCH_CHECK(scale.is_cuda() && scale.scalar_type() == at::kFloat && scale.is_contiguous() && scale.dim() == 2 &&
              scale.size(0) == s_rows && scale.size(1) == s_cols, "scale: contiguous fp32 (", s_rows, ", ", s_cols, ")");
  auto c = torch::empty({M, b.size(0)}, a.options());
  const float *s = scale.data_ptr<float>();
  if (mode == 0) launch<256, 0>(a, b, c, s);
  else if (mode == 1) launch<256, 1>(a, b, c, s);
  else if (mode == 2) launch<256, 2>(a, b, c, s);
  else launch<256, 3>(a, b, c, s);
  return c;
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("gemm", &gemm, "C = A' B^T with A' = A (modes 0, 1), A scaled per (row, 256-column block) (mode 2), or A "
                       "given as A^T and scaled per (256-row block, column) (mode 3)");
}
