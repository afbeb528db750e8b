"""The MLP family's GELU / GELU' epilogue GEMMs side by side in one process: the shipped kernels
(tk_kernels/families/mlp, staged epilogues), the previous register-pending version
(dev/hopper/mlp_gemm_v1.cu, built here as its own extension with the family's bindings.cpp, bf16 GELU /
GELU' kernels only), the shipped plain-store GEMM of the same shape, and cuBLAS + PyTorch's elementwise
GELU kernels. First checks every variant against float64 (relative L2, PyTorch's own 16-bit error as
the scale), then times them (triton do_bench medians), then the MLP fwd+bwd step (tk vs eager; torch.compile
with --compile).

    python dev/hopper/check_mlp_epilogue.py [--compile] [--no-v1]     # on an sm_90 GPU

Prints progressively (a hang or crash still leaves the lines before it); exit code 1 if a check fails.
"""
import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

STORE, GELU, DGELU = 0, 1, 2


def say(*a):
    print(*a, flush=True)


def build_v1():
    from torch.utils import cpp_extension
    from tk_kernels import build
    cflags, cuda_flags = build.compile_flags(["sm_90a"], verbose_ptxas=False)
    csrc = os.path.join(ROOT, "tk_kernels", "families", "mlp", "csrc")
    t0 = time.time()
    ext = cpp_extension.load(
        name="tk_dev_mlp_v1", sources=[os.path.join(ROOT, "dev", "hopper", "mlp_gemm_v1.cu"),
                                       os.path.join(csrc, "bindings.cpp")],
        extra_include_paths=[os.path.join(ROOT, "tk_kernels", "include"), csrc],
        extra_cflags=cflags, extra_cuda_cflags=cuda_flags, verbose=False)
    say(f"built dev v1 in {time.time() - t0:.0f}s")
    return ext


def rel(x, ref):
    x, ref = x.double(), ref.double()
    if not torch.isfinite(x).all():
        return float("inf")
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def operands(M, N, K, g, dtype=torch.bfloat16):
    r = lambda *s, scale=1.0: (torch.randn(*s, generator=g, device="cuda") * scale).to(dtype)
    return dict(x=r(M, K), w=r(N, K, scale=K ** -0.5), bias=torch.randn(N, generator=g, device="cuda") * 0.1,
                dy=r(M, K), wp=r(K, N, scale=K ** -0.5), pre=r(M, N))


def run_gelu(ext, o, approx):
    M, N = o["x"].shape[0], o["w"].shape[0]
    pre = torch.full((M, N), float("nan"), device="cuda", dtype=o["x"].dtype)
    act = torch.full_like(pre, float("nan"))
    ext.gemm_(o["x"], False, o["w"], False, act, GELU, o["bias"], pre, approx == "tanh")
    return pre, act


def run_dgelu(ext, o, approx, sums=None):
    # dh = (dy W) * gelu'(pre): dy (M, K), W (K, N) MN-major (nn.Linear's (out, in) weight of c_proj);
    # sums (shipped only): dh's column sums per 64-row block
    M, N = o["dy"].shape[0], o["wp"].shape[1]
    dh = torch.full((M, N), float("nan"), device="cuda", dtype=o["dy"].dtype)
    if sums is None:
        ext.gemm_(o["dy"], False, o["wp"], True, dh, DGELU, None, o["pre"], approx == "tanh")
    else:
        ext.gemm_(o["dy"], False, o["wp"], True, dh, DGELU, None, o["pre"], approx == "tanh", 0, sums)
    return dh


def check(exts, shapes):
    ok = True
    g = torch.Generator(device="cuda").manual_seed(1234)
    say(f"\ncheck (rel-L2 vs float64; torch = PyTorch's own 16-bit error; tol = max(2 torch, 6e-3))")
    for M, N, K in shapes:
        o = operands(M, N, K, g)
        x64, w64, b64 = o["x"].double(), o["w"].double(), o["bias"].double()
        ref_pre = x64 @ w64.T + b64
        t_pre = F.linear(o["x"], o["w"], o["bias"].to(o["x"].dtype))
        dyw64 = o["dy"].double() @ o["wp"].double()
        for approx in ("none", "tanh"):
            ref_act = F.gelu(ref_pre, approximate=approx)
            t_act = F.gelu(t_pre, approximate=approx)
            p64 = o["pre"].double().requires_grad_()
            gg, = torch.autograd.grad(F.gelu(p64, approximate=approx).sum(), p64)
            ref_dh = dyw64 * gg
            t_dh = torch.ops.aten.gelu_backward(o["dy"] @ o["wp"], o["pre"], approximate=approx)
            e_pre, e_act, e_dh = rel(t_pre, ref_pre), rel(t_act, ref_act), rel(t_dh, ref_dh)
            cells = []
            for name, ext in exts.items():
                pre, act = run_gelu(ext, o, approx)
                dh = run_dgelu(ext, o, approx)
                errs = (rel(pre, ref_pre), rel(act, ref_act), rel(dh, ref_dh))
                bad = [e > max(2 * t, 6e-3) for e, t in zip(errs, (e_pre, e_act, e_dh))]
                ok &= not any(bad)
                cells.append(f"{name}: pre {errs[0]:.1e} gelu {errs[1]:.1e} dgelu {errs[2]:.1e}"
                             f"{' WRONG' if any(bad) else ''}")
            # the shipped GELU' column sums (db_fc) against its own dh, up to fp32 summation order
            sums = torch.full(((M + 63) // 64, N), float("nan"), device="cuda")
            dh = run_dgelu(exts["shipped"], o, approx, sums)
            blocks = F.pad(dh.float(), (0, 0, 0, (-M) % 64)).view(-1, 64, N).sum(1)
            e_sum = (sums - blocks).abs().max().item() / (dh.float().abs().sum(0).max().item() + 1e-30)
            e_sum = e_sum if torch.isfinite(sums).all() else float("inf")
            ok &= e_sum < 1e-5
            cells.append(f"sums {e_sum:.1e}{' WRONG' if e_sum >= 1e-5 else ''}")
            say(f"  ({M},{N},{K}) {approx:<4} torch: {e_pre:.1e} {e_act:.1e} {e_dh:.1e} | " + " | ".join(cells))
        torch.cuda.synchronize()
    return ok


def time_gemms(exts, shapes):
    from triton.testing import do_bench
    bench = lambda fn: do_bench(fn, warmup=20, rep=80, return_mode="median")
    g = torch.Generator(device="cuda").manual_seed(5)
    names = list(exts)
    say("\nGEMM ms (median); plain = the shipped GEMM's plain store of the same product; torch = cuBLAS + PyTorch's"
        " GELU / GELU' kernel")
    say(f"{'epilogue':<8} {'M,N,K':<18}" + "".join(f"{n:>9}" for n in names) + f"{'plain':>9}{'torch':>9}"
        + f"{'TFLOP/s':>9}  {names[0]}/torch")
    for M, N, K in shapes:
        o = operands(M, N, K, g)
        flop = 2 * M * N * K
        pre, act = torch.empty(M, N, device="cuda", dtype=torch.bfloat16), torch.empty(M, N, device="cuda",
                                                                                      dtype=torch.bfloat16)
        b16 = o["bias"].to(torch.bfloat16)
        ext0 = exts[names[0]]
        row = [bench(lambda e=e: e.gemm_(o["x"], False, o["w"], False, act, GELU, o["bias"], pre)) for e in exts.values()]
        plain = bench(lambda: ext0.gemm_(o["x"], False, o["w"], False, act, STORE, o["bias"]))
        ref = bench(lambda: F.gelu(torch.addmm(b16, o["x"], o["w"].t(), out=pre)))
        say(f"{'gelu':<8} {f'{M},{N},{K}':<18}" + "".join(f"{t:9.4f}" for t in row) + f"{plain:9.4f}{ref:9.4f}"
            + f"{flop / row[0] / 1e9:9.0f}  {ref / row[0]:.2f}x")
        dh = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        row = [bench(lambda e=e: e.gemm_(o["dy"], False, o["wp"], True, dh, DGELU, None, o["pre"])) for e in exts.values()]
        plain = bench(lambda: ext0.gemm_(o["dy"], False, o["wp"], True, dh, STORE))
        ref = bench(lambda: torch.ops.aten.gelu_backward(torch.mm(o["dy"], o["wp"]), o["pre"]))
        say(f"{'dgelu':<8} {f'{M},{N},{K}':<18}" + "".join(f"{t:9.4f}" for t in row) + f"{plain:9.4f}{ref:9.4f}"
            + f"{flop / row[0] / 1e9:9.0f}  {ref / row[0]:.2f}x")
        # + the bias gradient: shipped fused column sums + a sum over the blocks; others: + dh.sum(0)
        sums = torch.empty((M + 63) // 64, N, device="cuda")
        fused = lambda: (ext0.gemm_(o["dy"], False, o["wp"], True, dh, DGELU, None, o["pre"], False, 0, sums),
                         sums.sum(0))
        row = [bench(fused)] + [bench(lambda e=e: (e.gemm_(o["dy"], False, o["wp"], True, dh, DGELU, None, o["pre"]),
                                                    dh.sum(0, dtype=torch.float32)))
                                for n, e in exts.items() if n != names[0]]
        ref = bench(lambda: torch.ops.aten.gelu_backward(torch.mm(o["dy"], o["wp"]), o["pre"]).sum(0, dtype=torch.float32))
        say(f"{'dgelu+db':<8} {f'{M},{N},{K}':<18}" + "".join(f"{t:9.4f}" for t in row) + f"{'':9}{ref:9.4f}"
            + f"{flop / row[0] / 1e9:9.0f}  {ref / row[0]:.2f}x")
        del o, pre, act, dh
        torch.cuda.empty_cache()


def time_mlp(Cs, N, with_compile):
    from triton.testing import do_bench
    import tk_kernels

    def reference_mlp(x, w_fc, b_fc, w_proj, b_proj):
        return F.linear(F.gelu(F.linear(x, w_fc, b_fc)), w_proj, b_proj)

    impls = {"tk": tk_kernels.mlp, "eager": reference_mlp}
    if with_compile:
        impls["compile"] = torch.compile(reference_mlp)
    say(f"\nMLP fwd+bwd (N={N}, bf16, biases, erf GELU), median ms")
    say(f"{'C':>5}" + "".join(f"{n:>9}" for n in impls) + "  best/tk")
    for C in Cs:
        H = 4 * C
        x = torch.randn(N, C, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        params = [(torch.randn(H, C, device="cuda") * C ** -0.5).bfloat16().requires_grad_(),
                  torch.zeros(H, device="cuda", dtype=torch.bfloat16, requires_grad=True),
                  (torch.randn(C, H, device="cuda") * H ** -0.5).bfloat16().requires_grad_(),
                  torch.zeros(C, device="cuda", dtype=torch.bfloat16, requires_grad=True)]
        dy = torch.randn(N, C, device="cuda", dtype=torch.bfloat16)
        ms = {}
        for name, fn in impls.items():
            def step(fn=fn):
                fn(x, *params).backward(dy)
                x.grad = None
                for p in params:
                    p.grad = None
            step()
            step()
            ms[name] = do_bench(step, warmup=10, rep=50, return_mode="median")
        best = min(v for k, v in ms.items() if k != "tk")
        say(f"{C:>5}" + "".join(f"{v:9.3f}" for v in ms.values()) + f"  {best / ms['tk']:.3f}x")
        del x, params, dy
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--compile", action="store_true", help="also torch.compile in the MLP table")
    ap.add_argument("--no-v1", action="store_true", help="skip building / timing the previous version")
    args = ap.parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        raise SystemExit("check_mlp_epilogue: needs an sm_90 GPU")
    from tk_kernels.families.mlp import ops
    t0 = time.time()
    exts = {"shipped": ops._ext()}
    say(f"shipped family loaded in {time.time() - t0:.0f}s")
    if not args.no_v1:
        try:
            exts["v1"] = build_v1()
        except Exception as ex:  # the comparison is optional; the shipped checks are not
            say(f"dev v1 build failed, timing the shipped kernels only: {str(ex)[-400:]}")
    ok = check(exts, [(7, 256, 128), (129, 2056, 264), (1000, 1600, 200), (16384, 3072, 768), (4096, 8192, 2048)])
    say("checks " + ("ok" if ok else "FAILED"))
    time_gemms(exts, [(16384, 3072, 768), (16384, 4096, 1024), (16384, 8192, 2048)])
    time_mlp([768, 1024, 2048], 16384, args.compile)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
