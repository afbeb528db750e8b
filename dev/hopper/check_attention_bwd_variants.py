"""Build the dev variants of the sm_90a attention backward (dev/hopper/attention_bwd_variants.cuh), check
them against the shipped Hopper backward, and time shipped vs variants vs cuDNN, backward alone.

    python dev/hopper/check_attention_bwd_variants.py   # on an H100 / H200, < 45 s once the family is built

Variants (the .cuh header says what each changes and why):
    pipe        the query-block loop rotated: S^T of the next block is issued right after dQ^T, so the
                dQ^T staging / bulk reductions run under it; Q / dO slots freed earlier, one more stage
    pipe+group  pipe, and causal grids launched in groups of heads whose rows fit in half the L2
                (non-causal: the same as pipe)
The variants are a small library of their own (plain nvcc, no torch headers: three translation units
compiled in parallel, ~10-20 s; cached under build/dev_bwd_variants/ by a hash of the sources and flags)
called through ctypes with the same buffers the family's attention_backward_hopper binding allocates.
Accuracy: 14 ragged cases, nanoGPT's strided q / k / v views, bf16: T in {1, 255, 1000} x D in {64, 128} x
causal and not, and two causal T = 1000 cases with 33 / 65 heads (two launch groups in pipe+group); dq / dk / dv of each variant vs the shipped kernel's, rel-L2 <= 1e-2,
outputs NaN-poisoned before every launch. Timing: median of triton's do_bench, backward alone (the
variants' time includes the workspace allocations, as the binding's does), TFLOP/s with the backward
counted as 2.5x the forward's 4 B H T^2 D (halved when causal); x = variant / shipped.
Exit status 1 if a check fails, 2 without an sm_90 GPU, 3 if a kernel hangs (watchdog).
"""
from __future__ import annotations

import ctypes
import hashlib
import math
import os
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
from check_attention import progress, watchdog  # noqa: E402
from check_attention_bwd import nanogpt_qkv, rel_err  # noqa: E402

CSRC = os.path.join(ROOT, "tk_kernels", "families", "attention", "csrc")
SOURCES = [os.path.join(HERE, "attention_bwd_variants_d64.cu"), os.path.join(HERE, "attention_bwd_variants_d128.cu"),
           os.path.join(CSRC, "backward_dq.cu")]  # the last: launch_dq_convert
VARIANTS = {"pipe": 1, "pipe+group": 2}
# (B, H, T, causal, D); the last two have more heads than one launch group of pipe+group holds (2 groups,
# the last partial), the others fit in one (the shipped order)
CASES = [((1, 3)[(i // 2) % 2], 3, T, causal, D) for i, (D, T, causal) in
         enumerate((D, T, causal) for D in (64, 128) for T in (1, 255, 1000) for causal in (True, False))] + \
        [(3, 11, 1000, True, 128), (5, 13, 1000, True, 64)]
SHAPES = [(16, 12, 1024, 64), (8, 16, 2048, 64), (8, 16, 2048, 128), (4, 16, 4096, 128), (64, 6, 256, 64)]
TOL = 1e-2


def build() -> ctypes.CDLL:
    from tk_kernels.build import find_cuda_home
    cuda_home = find_cuda_home()
    if cuda_home is None:
        raise RuntimeError("no CUDA toolkit (set CUDA_HOME)")
    nvcc = os.path.join(cuda_home, "bin", "nvcc")
    flags = ["-O3", "-std=c++20", "--use_fast_math", "-lineinfo", "--expt-relaxed-constexpr",
             "-gencode", "arch=compute_90a,code=sm_90a", "-Xcompiler", "-fPIC",
             "-I", os.path.join(ROOT, "tk_kernels", "include"), "-I", CSRC]
    h = hashlib.sha256(" ".join(flags).encode())
    h.update(subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.encode())
    deps = SOURCES + [os.path.join(HERE, "attention_bwd_variants.cuh")]
    for d in (CSRC, os.path.join(ROOT, "tk_kernels", "include")):
        for dirpath, _, files in os.walk(d):
            deps += [os.path.join(dirpath, f) for f in files if f.endswith((".cu", ".cuh", ".h"))]
    for path in sorted(set(deps)):
        with open(path, "rb") as f:
            h.update(path.encode() + f.read())
    out = os.path.join(ROOT, "build", "dev_bwd_variants", h.hexdigest()[:16])
    lib = os.path.join(out, "libtk_dev_bwd_variants.so")
    if not os.path.exists(lib):
        os.makedirs(out, exist_ok=True)
        t0 = time.time()
        objs = [os.path.join(out, os.path.basename(s) + ".o") for s in SOURCES]
        procs = [subprocess.Popen([nvcc, *flags, "-Xptxas", "-v", "-c", s, "-o", o], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True) for s, o in zip(SOURCES, objs)]
        logs = [p.communicate()[0] for p in procs]
        for s, p, log in zip(SOURCES, procs, logs):
            if p.returncode != 0:
                raise RuntimeError(f"nvcc {os.path.basename(s)} failed:\n{log[-3000:]}")
        spills = [ln.strip() for log in logs for ln in log.splitlines()
                  if "spill" in ln and not ln.strip().startswith("0 bytes stack frame, 0 bytes spill stores, 0 bytes")]
        warns = [ln.strip() for log in logs for ln in log.splitlines() if "(C75" in ln]
        for ln in spills + warns:
            print(f"ptxas: {ln[:160]}")
        link = subprocess.run([nvcc, "-shared", "-o", lib + ".tmp", *objs], capture_output=True, text=True)
        if link.returncode != 0:
            raise RuntimeError(f"link failed:\n{link.stderr[-3000:]}")
        os.replace(lib + ".tmp", lib)
        print(f"variants built in {time.time() - t0:.0f} s ({'no spills, no C75xx warnings' if not spills + warns else 'SEE ptxas lines above'})")
    dll = ctypes.CDLL(lib)
    f = dll.tkdev_hbwd
    f.restype = ctypes.c_int
    f.argtypes = [ctypes.c_int] + [ctypes.c_void_p] * 12 + [ctypes.c_void_p] + [ctypes.c_int] * 5 + \
        [ctypes.c_float, ctypes.c_void_p]
    return dll


def variant_backward(dll, variant, q, k, v, o, lse, dout, causal, scale):
    """dq, dk, dv from a dev variant: the buffers of the family's attention_backward_hopper binding."""
    B, H, T, D = q.shape
    Tp = (T + 127) // 128 * 128
    dq, dk, dv = (torch.empty((B, T, H, D), dtype=q.dtype, device=q.device).transpose(1, 2) for _ in range(3))
    delta = torch.empty((B, H, Tp), dtype=torch.float32, device=q.device)
    lse2 = torch.empty((B, H, Tp), dtype=torch.float32, device=q.device)
    dq_accum = torch.zeros((B, H, Tp, D), dtype=torch.float32, device=q.device)
    ts = (q, k, v, o, dout, dq, dk, dv)
    strides = (ctypes.c_int64 * 24)(*[s for t in ts for s in t.stride()[:3]])
    err = dll.tkdev_hbwd(variant, q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), dout.data_ptr(),
                         lse.data_ptr(), dq.data_ptr(), dk.data_ptr(), dv.data_ptr(), delta.data_ptr(),
                         lse2.data_ptr(), dq_accum.data_ptr(), ctypes.cast(strides, ctypes.c_void_p), B, H, T, D,
                         int(causal), scale, torch.cuda.current_stream().cuda_stream)
    if err != 0:
        raise RuntimeError(f"dev variant {variant}: cudaError {err}")
    return dq, dk, dv


def poison(q):
    B, H, T, D = q.shape
    blocks = [torch.full((B * H * T * D * q.element_size(),), 255, dtype=torch.uint8, device="cuda")
              for _ in range(3)]
    del blocks


def check(ext, dll) -> int:
    failures = 0
    print(f"accuracy vs the shipped Hopper backward (rel-L2 dq / dk / dv, tol {TOL:g}; nanoGPT strided views, bf16)")
    for i, (B, H, T, causal, D) in enumerate(CASES):
        g = torch.Generator(device="cuda").manual_seed(100 + i)
        q, k, v = nanogpt_qkv(B, H, T, D, torch.bfloat16, g)
        dout = torch.randn(q.shape, generator=g, device="cuda").to(torch.bfloat16)
        sc = 1.0 / math.sqrt(D)
        o, lse, _ = ext.attention_forward_hopper(q, k, v, causal, sc)
        poison(q)
        ref = ext.attention_backward_hopper(q, k, v, o, lse, dout, causal, sc)
        line = f"  B={B} H={H} T={T:4d} D={D:3d} {'causal' if causal else 'full  '}"
        for name, var in VARIANTS.items():
            progress(f"check {name} {line.strip()}", limit_s=20.0)
            poison(q)
            try:
                got = variant_backward(dll, var, q, k, v, o, lse, dout, causal, sc)
                torch.cuda.synchronize()
                errs = [rel_err(x, r) if torch.isfinite(x).all() else float("nan") for x, r in zip(got, ref)]
            except RuntimeError as e:
                errs = [float("nan")] * 3
                print(f"  {name}: {str(e).splitlines()[0][:160]}")
            ok = all(e <= TOL for e in errs)  # NaN fails
            failures += not ok
            line += f" | {name} " + " / ".join(f"{e:.1e}" for e in errs) + ("" if ok else " FAIL")
        print(line, flush=True)
    return failures


def group_of(heads: int, T: int, D: int, l2: int) -> int:
    """Heads per launch group of pipe+group's causal grids (as launch_dev_bwd computes it)."""
    return max(1, min(heads, (l2 // 2) // (8 * T * D)))


def bench(ext, dll) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench
    import torch.nn.functional as F

    def ms_of(fn):
        fn()
        torch.cuda.synchronize()
        return do_bench(fn, warmup=5, rep=25, return_mode="median")

    names = ["shipped", *VARIANTS, "cudnn"]
    print("\nbackward alone, TFLOP/s (bf16, contiguous; 2.5x forward FLOPs); x = / shipped, / cudnn")
    print(f"{'(B,H,T,D)':18s} {'mask':6s}" + "".join(f"{n:>11s}" for n in names) +
          "".join(f"{'x ' + n:>13s}" for n in VARIANTS) + f"{'best/cudnn':>11s}  heads/group (pipe+group)")
    l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0)
    for B, H, T, D in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(7)
        q, k, v, dout = (torch.randn((B, H, T, D), generator=g, device="cuda").to(torch.bfloat16) for _ in range(4))
        sc = 1.0 / math.sqrt(D)
        for causal in (True, False):
            flop = 2.5 * 4 * B * H * T * T * D / (2 if causal else 1)
            o, lse, _ = ext.attention_forward_hopper(q, k, v, causal, sc)
            fns = {"shipped": lambda: ext.attention_backward_hopper(q, k, v, o, lse, dout, causal, sc)}
            for name, var in VARIANTS.items():
                fns[name] = (lambda var=var: variant_backward(dll, var, q, k, v, o, lse, dout, causal, sc))
            tf = {}
            for name, fn in fns.items():
                progress(f"bench {name} {(B, H, T, D)} causal={causal}", limit_s=20.0)
                try:
                    tf[name] = flop / ms_of(fn) / 1e9
                except RuntimeError:
                    tf[name] = float("nan")
            qs, ks, vs = (t.detach().requires_grad_() for t in (q, k, v))
            progress(f"bench cudnn {(B, H, T, D)} causal={causal}", limit_s=20.0)
            try:
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    y = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, scale=sc)
                    tf["cudnn"] = flop / ms_of(lambda: torch.autograd.grad(y, (qs, ks, vs), dout,
                                                                           retain_graph=True)) / 1e9
                del y
            except RuntimeError:
                tf["cudnn"] = float("nan")
            best = max(tf[n] for n in ("shipped", *VARIANTS))
            print(f"{str((B, H, T, D)):18s} {'causal' if causal else 'full':6s}" +
                  "".join(f"{tf[n]:11.0f}" for n in names) +
                  "".join(f"{tf[n] / tf['shipped']:6.2f}/{tf[n] / tf['cudnn']:5.2f} " for n in VARIANTS) +
                  f"{best / tf['cudnn']:11.2f}  {group_of(B * H, T, D, l2) if causal and l2 else '-'}", flush=True)


def main() -> int:
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("needs an sm_90 GPU (H100 / H200)")
        return 2
    t0 = time.time()
    watchdog()
    progress("family build", limit_s=1200.0)
    from tk_kernels.build import load_extension
    ext = load_extension("attention")
    t1 = time.time()
    progress("variants build", limit_s=300.0)
    try:
        dll = build()
    except RuntimeError as e:
        print(f"variants: {e}")
        return 1
    print(f"family ready in {t1 - t0:.0f} s, variants in {time.time() - t1:.0f} s; torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}", flush=True)
    failures = check(ext, dll)
    print(f"{'ALL CHECKS PASSED' if failures == 0 else f'{failures} CHECKS FAILED'}", flush=True)
    bench(ext, dll)
    print(f"total after the family build: {time.time() - t1:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
