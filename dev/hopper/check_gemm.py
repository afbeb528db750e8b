"""Build dev/hopper/gemm.cu, check it against a float64 reference and time it beside cuBLAS.

    python dev/hopper/check_gemm.py            # on an sm_90 GPU
"""
import os
import sys
import time

import torch
from torch.utils import cpp_extension

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build():
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"  # only sm_90a code: wgmma/setmaxnreg need the arch-specific target
    t0 = time.time()
    ext = cpp_extension.load(
        name="tk_dev_gemm", sources=[os.path.join(ROOT, "dev", "hopper", "gemm.cu")],
        extra_include_paths=[os.path.join(ROOT, "tk_kernels", "include")],
        extra_cuda_cflags=["-std=c++20", "-O3"],
        verbose=False)
    print(f"built in {time.time() - t0:.0f}s")
    return ext


def rel_l2(x, ref):
    return ((x.double() - ref).norm() / ref.norm()).item()


def main():
    ext = build()
    torch.manual_seed(0)
    worst = 0.0
    for version, bn in ((1, 128), (1, 256), (2, 128), (2, 256)):
        for M, N, K in [(128, 256, 64), (1, 256, 128), (7, 768, 768), (1000, 2304, 768), (16384, 768, 3072),
                        (16384, 3072, 768), (4096, 4096, 4096)]:
            if N % bn:
                continue
            a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
            b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
            c = ext.gemm(a, b, bn, version)
            torch.cuda.synchronize()
            ref = a.double() @ b.double().T
            err = rel_l2(c, ref)
            cub = rel_l2(a @ b.T, ref)
            ok = err < 2 * cub + 1e-3 and not torch.isnan(c).any().item()
            worst = max(worst, err)
            print(f"check v{version} BN={bn} M={M} N={N} K={K}: rel-L2 {err:.2e} (cuBLAS {cub:.2e}) {'ok' if ok else 'WRONG'}")
    from triton.testing import do_bench
    variants = ((1, 128), (1, 256), (2, 128), (2, 256))
    print("\nTFLOP/s (median)" + "".ljust(8) + "".join(f"v{v} BN={bn}".rjust(13) for v, bn in variants) + "cuBLAS".rjust(13))
    for M, N, K in [(8192, 8192, 8192), (16384, 3072, 768), (16384, 768, 3072), (16384, 2304, 768),
                    (16384, 768, 768), (16384, 4096, 1024), (16384, 1024, 4096)]:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        flop = 2 * M * N * K
        row = []
        for version, bn in variants:
            if N % bn:
                row.append("n/a")
                continue
            ms = do_bench(lambda: ext.gemm(a, b, bn, version), warmup=50, rep=200, return_mode="median")
            row.append(f"{flop / ms / 1e9:.0f}")
        ms = do_bench(lambda: a @ b.T, warmup=50, rep=200, return_mode="median")
        row.append(f"{flop / ms / 1e9:.0f}")
        print(f"({M},{N},{K})".ljust(24) + "".join(r.rjust(13) for r in row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
