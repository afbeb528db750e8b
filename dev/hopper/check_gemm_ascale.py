"""Build dev/hopper/gemm_ascale.cu, check its three mainloops against float64 and time them beside cuBLAS:

    python dev/hopper/check_gemm_ascale.py            # on an sm_90 GPU
    python dev/hopper/check_gemm_ascale.py --build    # build only (any machine with nvcc): then read its SASS

The question (dev/README, "Leads after session 25"): does feeding the A operand through registers with a per-(row,
256-column block) scale cost the GEMM anything? Mode 0 is the plain shared-memory GEMM, mode 1 the same with A
from registers (ldmatrix), mode 2 with A scaled on the way (one bf16x2 multiply a register: the classifier's dx),
mode 3 with A stored MN-major, loaded by ldmatrix.trans and scaled per K column of its 256-row block (the
classifier's dW). Every mode's output is compared with a float64 product of the same bf16 operands (modes 2 and 3:
A scaled and rounded as the kernel does).
"""
import argparse
import os
import sys
import time

import torch
from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build():
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"  # wgmma / setmaxnreg need the arch-specific target
    t0 = time.time()
    ext = cpp_extension.load(
        name="tk_dev_gemm_ascale", sources=[os.path.join(ROOT, "dev", "hopper", "gemm_ascale.cu")],
        extra_include_paths=[os.path.join(ROOT, "tk_kernels", "include")],
        extra_cuda_cflags=["-std=c++20", "-O3", "-Xptxas", "-v"], verbose=False)
    print(f"built in {time.time() - t0:.0f}s")
    return ext


def scaled(a, scale):
    """a scaled per (row, 256-column block) and rounded to bf16, as the kernel's mode 2 does."""
    s = scale.to(torch.bfloat16).float().repeat_interleave(256, dim=1)
    return (a.float() * s).to(torch.bfloat16)


def scaled_k(a, scale):
    """a (M, K) scaled per (256-row block, column) by scale (ceil(M / 256), K), rounded to bf16 (mode 3)."""
    s = scale.to(torch.bfloat16).float().repeat_interleave(256, dim=0)[:a.shape[0]]
    return (a.float() * s).to(torch.bfloat16)


def run(ext, a, b, scale, scale_k, mode):
    """mode 3 takes A^T and the (ceil(M / 256), K) scale; the others A and the (M, K / 256) one."""
    return ext.gemm(a.t().contiguous() if mode == 3 else a, b, scale_k if mode == 3 else scale, mode)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", action="store_true", help="build only")
    args = ap.parse_args()
    ext = build()
    if args.build:
        return
    from triton.testing import do_bench
    print(torch.cuda.get_device_name(), torch.__version__)
    torch.manual_seed(0)
    worst = 0.0
    for M, N, K in [(128, 256, 256), (64, 256, 512), (1024, 768, 2048), (320, 512, 1280), (4096, 3072, 768)]:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) * K ** -0.5
        scale = torch.rand(M, K // 256, device="cuda") * 2 ** torch.randint(-20, 1, (M, K // 256), device="cuda")
        mb = (M + 255) // 256
        scale_k = torch.rand(mb, K, device="cuda") * 2 ** torch.randint(-20, 1, (mb, K), device="cuda")
        for mode in (0, 1, 2, 3):
            c = run(ext, a, b, scale, scale_k, mode)
            aa = scaled(a, scale) if mode == 2 else scaled_k(a, scale_k) if mode == 3 else a
            ref = aa.double() @ b.double().T
            err = ((c.double() - ref).norm() / ref.norm()).item()
            worst = max(worst, err)
            print(f"  M={M} N={N} K={K} mode {mode}: rel err {err:.2e}")
            assert err < 1e-2, err
    print(f"all checks passed (worst {worst:.2e})")
    for M, N, K in [(16384, 768, 4096), (2048, 768, 50176), (50176, 768, 2048), (16384, 3072, 768),
                    (8192, 8192, 8192)]:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        at = a.t().contiguous()
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) * K ** -0.5
        scale = torch.rand(M, K // 256, device="cuda")
        scale_k = torch.rand((M + 255) // 256, K, device="cuda")
        flop = 2 * M * N * K
        t = {mode: do_bench(lambda: ext.gemm(a, b, scale, mode), return_mode="median") for mode in (0, 1, 2)}
        t[3] = do_bench(lambda: ext.gemm(at, b, scale_k, 3), return_mode="median")
        t_cublas = do_bench(lambda: torch.mm(a, b.t()), return_mode="median")
        print(f"({M}, {N}, {K}): TFLOP/s SS {flop / t[0] / 1e9:.0f}  RS {flop / t[1] / 1e9:.0f}  "
              f"RS+scale {flop / t[2] / 1e9:.0f}  MN-major RS+scale {flop / t[3] / 1e9:.0f}  cuBLAS "
              f"{flop / t_cublas / 1e9:.0f}  (time / SS: RS+scale {t[2] / t[0]:.3f}, MN-major {t[3] / t[0]:.3f})")


if __name__ == "__main__":
    sys.exit(main())
