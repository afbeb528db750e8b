"""The MLP family's weight-gradient GEMMs dW = a^T b (a (K, M), b (K, N), K = tokens, fp32 out) side by
side in one process: the shipped split-K path (gemm_ with the store_f32 epilogue, its output zeroed
first, as ops._weight_grad runs it), the stream-K kernel (gemm_dw_, zeroes its own output; one or two
problems per launch) and cuBLAS (torch.mm of the transposed view, bf16 out, and fp32 out where this
torch has mm's out_dtype). First checks both tk paths against float64 (relative L2; NaN-poisoned
outputs, strided outputs whose padding must stay untouched, ragged K, M / N not multiples of the
128 x 256 tile, bf16 and fp16, pairs), then the MLP op's gradients with TK_MLP_DW=streamk against
the default path, then times the GEMMs (triton do_bench medians, L2 flushed), the MLP's two dW
GEMMs as one grouped launch, and the MLP fwd+bwd step with either path beside eager PyTorch.

    python dev/hopper/check_mlp_dw.py          # on an sm_90 GPU; ~20 s after the family build

Prints progressively; exit code 1 if a check fails.
"""
import os
import sys
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

STORE_F32 = 3


def say(*a):
    print(*a, flush=True)


def rel(x, ref):
    x, ref = x.double(), ref.double()
    if not torch.isfinite(x).all():
        return float("inf")
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def operands(M, N, K, g, dtype=torch.bfloat16):
    a = torch.randn(K, M, generator=g, device="cuda").to(dtype)
    b = torch.randn(K, N, generator=g, device="cuda").to(dtype)
    return a, b


def splitk(ext, a, b, c):
    c.zero_()
    ext.gemm_(a, True, b, True, c, STORE_F32)


def poisoned(M, N, pad):
    """A NaN-filled fp32 (M, N) output; with pad, the left part of an (M, N + pad) buffer (row stride
    N + pad), returned with the buffer to check that the padding stays NaN."""
    buf = torch.full((M, N + pad), float("nan"), device="cuda")
    return buf[:, :N], buf


def check(ext):
    ok = True
    g = torch.Generator(device="cuda").manual_seed(1234)
    say("\ncheck dW = a^T b (rel-L2 vs float64; tol = max(3 x split-K's, 2e-5); pad = untouched padding columns)")
    singles = [(768, 3072, 16384, torch.bfloat16), (3072, 768, 16384, torch.bfloat16),
               (1024, 4096, 640, torch.bfloat16), (200, 328, 1000, torch.bfloat16), (200, 328, 1000, torch.float16),
               (136, 264, 77, torch.bfloat16), (8, 8, 1, torch.bfloat16), (392, 520, 8191, torch.float16)]
    for M, N, K, dtype in singles:
        a, b = operands(M, N, K, g, dtype)
        ref = a.double().T @ b.double()
        c_old = torch.full((M, N), float("nan"), device="cuda")
        splitk(ext, a, b, c_old)
        e_old = rel(c_old, ref)
        errs = []
        for pad in (0, 8):
            c, buf = poisoned(M, N, pad)
            ext.gemm_dw_(a, b, c)
            pad_ok = pad == 0 or bool(buf[:, N:].isnan().all())
            errs.append((rel(c, ref), pad_ok))
        tol = max(3 * e_old, 2e-5)
        bad = any(e > tol or not p for e, p in errs)
        ok &= not bad and e_old < 1e-4
        say(f"  ({M},{N},{K}) {str(dtype)[6:]:<8} split-K {e_old:.1e} | stream-K {errs[0][0]:.1e}, strided "
            f"{errs[1][0]:.1e} pad {'ok' if errs[1][1] else 'WRITTEN'}{' WRONG' if bad else ''}")
        del a, b, ref, c_old
    pairs = [((768, 3072, 4096), (3072, 768, 4096)), ((200, 328, 1000), (64, 8, 130)), ((8, 16, 3), (1024, 4096, 2048))]
    for p0, p1 in pairs:
        (a0, b0), (a1, b1) = operands(*p0, g), operands(*p1, g)
        c0, buf0 = poisoned(p0[0], p0[1], 0)
        c1, buf1 = poisoned(p1[0], p1[1], 8)
        ext.gemm_dw_(a0, b0, c0, a1, b1, c1)
        e0, e1 = rel(c0, a0.double().T @ b0.double()), rel(c1, a1.double().T @ b1.double())
        pad_ok = bool(buf1[:, p1[1]:].isnan().all())
        bad = e0 > 2e-5 or e1 > 2e-5 or not pad_ok
        ok &= not bad
        say(f"  pair {p0} + {p1}: {e0:.1e}, {e1:.1e} pad {'ok' if pad_ok else 'WRITTEN'}{' WRONG' if bad else ''}")
    # bad calls are clear errors
    a, b = operands(64, 64, 64, g)
    for what, call in (("K mismatch", lambda: ext.gemm_dw_(a, b[:32], torch.empty(64, 64, device="cuda"))),
                       ("bf16 c", lambda: ext.gemm_dw_(a, b, torch.empty(64, 64, device="cuda", dtype=torch.bfloat16))),
                       ("half a pair", lambda: ext.gemm_dw_(a, b, torch.empty(64, 64, device="cuda"), a))):
        try:
            call()
            say(f"  bad call ({what}) accepted: WRONG")
            ok = False
        except RuntimeError:
            pass
    return ok


def check_mlp():
    """The MLP op's gradients with TK_MLP_DW=streamk against the default (split-K) path."""
    import tk_kernels
    ok = True
    g = torch.Generator(device="cuda").manual_seed(7)
    say("\ncheck the MLP op's gradients, TK_MLP_DW=streamk vs the default (max rel-L2 over dx, dW_fc, db_fc, dW_proj, db_proj)")
    for N, C, wdtype in ((1000, 200, torch.bfloat16), (4096, 768, torch.float32)):
        H = 4 * C
        x = torch.randn(N, C, generator=g, device="cuda").bfloat16()
        ws = [torch.randn(H, C, generator=g, device="cuda") * C ** -0.5, torch.randn(H, generator=g, device="cuda") * 0.1,
              torch.randn(C, H, generator=g, device="cuda") * H ** -0.5, torch.randn(C, generator=g, device="cuda") * 0.1]
        ws = [w.to(wdtype) for w in ws]
        dy = torch.randn(N, C, generator=g, device="cuda").bfloat16()
        grads = {}
        for path in ("splitk", "streamk"):
            os.environ["TK_MLP_DW"] = path
            xr = x.clone().requires_grad_()
            wr = [w.clone().requires_grad_() for w in ws]
            tk_kernels.mlp(xr, *wr).backward(dy)
            grads[path] = [xr.grad] + [w.grad for w in wr]
        os.environ.pop("TK_MLP_DW")
        e = max(rel(s, r) for s, r in zip(grads["streamk"], grads["splitk"]))
        same_dtypes = all(s.dtype == r.dtype for s, r in zip(grads["streamk"], grads["splitk"]))
        bad = not e < 1e-3 or not same_dtypes
        ok &= not bad
        say(f"  N={N} C={C} weights {str(wdtype)[6:]}: {e:.1e}{' WRONG' if bad else ''}")
    return ok


def time_gemms(ext, shapes):
    from triton.testing import do_bench
    bench = lambda fn: do_bench(fn, warmup=20, rep=80, return_mode="median")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    g = torch.Generator(device="cuda").manual_seed(5)
    say("\ndW = a^T b, bf16, ms (median). split-K: zero + gemm_ store_f32 (the shipped path); stream-K: gemm_dw_ (its"
        " own zeroing included); zero: the zeroing alone; cuBLAS: torch.mm bf16 out, fp32 out")
    say(f"{'M,N,K':<18}{'splits':>7}{'split-K':>9}{'stream-K':>9}{'zero':>8}{'cuBLAS':>9}{'cuB f32':>9}"
        f"{'TFLOP/s':>9}  {'new/old':>7} {'cuBLAS/new':>10}")
    for M, N, K in shapes:
        a, b = operands(M, N, K, g)
        c = torch.empty(M, N, device="cuda")
        c16 = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        flop = 2 * M * N * K
        t_old = bench(lambda: splitk(ext, a, b, c))
        t_new = bench(lambda: ext.gemm_dw_(a, b, c))
        t_zero = bench(lambda: c.zero_())
        t_cub = bench(lambda: torch.mm(a.t(), b, out=c16))
        try:
            t_cub32 = bench(lambda: torch.mm(a.t(), b, out_dtype=torch.float32))
            cub32 = f"{t_cub32:9.4f}"
        except (TypeError, RuntimeError):
            cub32 = f"{'n/a':>9}"
        say(f"{f'{M},{N},{K}':<18}{ext.splits(M, N, K, sms):>7}{t_old:9.4f}{t_new:9.4f}{t_zero:8.4f}{t_cub:9.4f}"
            f"{cub32}{flop / t_new / 1e9:9.0f}  {t_old / t_new:6.2f}x {t_cub / t_new:9.2f}x")
        del a, b, c, c16
    torch.cuda.empty_cache()


def time_pairs(ext, Cs, K):
    """The MLP's dW_proj = dy^T g (C, 4C) and dW_fc = dh^T x (4C, C): two split-K calls, one grouped
    stream-K launch, two stream-K launches, two cuBLAS calls."""
    from triton.testing import do_bench
    bench = lambda fn: do_bench(fn, warmup=20, rep=80, return_mode="median")
    g = torch.Generator(device="cuda").manual_seed(6)
    say(f"\nthe MLP's two dW GEMMs (K={K}), ms (median)")
    say(f"{'C':>6}{'split-K x2':>11}{'grouped':>9}{'s-K x2':>9}{'cuBLAS x2':>10}{'TFLOP/s':>9}  {'new/old':>7} {'cuBLAS/new':>10}")
    for C in Cs:
        H = 4 * C
        dy, gg = operands(C, H, K, g)
        dh, x = operands(H, C, K, g)
        c0, c1 = torch.empty(C, H, device="cuda"), torch.empty(H, C, device="cuda")
        o0, o1 = torch.empty(C, H, device="cuda", dtype=torch.bfloat16), torch.empty(H, C, device="cuda", dtype=torch.bfloat16)
        t_old = bench(lambda: (splitk(ext, dy, gg, c0), splitk(ext, dh, x, c1)))
        t_grp = bench(lambda: ext.gemm_dw_(dy, gg, c0, dh, x, c1))
        t_two = bench(lambda: (ext.gemm_dw_(dy, gg, c0), ext.gemm_dw_(dh, x, c1)))
        t_cub = bench(lambda: (torch.mm(dy.t(), gg, out=o0), torch.mm(dh.t(), x, out=o1)))
        flop = 2 * 2 * C * H * K
        say(f"{C:>6}{t_old:11.4f}{t_grp:9.4f}{t_two:9.4f}{t_cub:10.4f}{flop / t_grp / 1e9:9.0f}  {t_old / t_grp:6.2f}x "
            f"{t_cub / t_grp:9.2f}x")
        del dy, gg, dh, x, c0, c1, o0, o1
    torch.cuda.empty_cache()


def time_mlp(Cs, N):
    from triton.testing import do_bench
    import tk_kernels

    def reference_mlp(x, w_fc, b_fc, w_proj, b_proj):
        return F.linear(F.gelu(F.linear(x, w_fc, b_fc)), w_proj, b_proj)

    say(f"\nMLP fwd+bwd (N={N}, bf16, biases, erf GELU), median ms; tk with either dW path")
    say(f"{'C':>5}{'splitk':>9}{'streamk':>9}{'eager':>9}  eager/splitk eager/streamk")
    for C in Cs:
        H = 4 * C
        x = torch.randn(N, C, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        params = [(torch.randn(H, C, device="cuda") * C ** -0.5).bfloat16().requires_grad_(),
                  torch.zeros(H, device="cuda", dtype=torch.bfloat16, requires_grad=True),
                  (torch.randn(C, H, device="cuda") * H ** -0.5).bfloat16().requires_grad_(),
                  torch.zeros(C, device="cuda", dtype=torch.bfloat16, requires_grad=True)]
        dy = torch.randn(N, C, device="cuda", dtype=torch.bfloat16)
        ms = {}
        for name, fn, path in (("splitk", tk_kernels.mlp, "splitk"), ("streamk", tk_kernels.mlp, "streamk"),
                               ("eager", reference_mlp, "splitk")):
            os.environ["TK_MLP_DW"] = path

            def step(fn=fn):
                fn(x, *params).backward(dy)
                x.grad = None
                for p in params:
                    p.grad = None
            step()
            step()
            ms[name] = do_bench(step, warmup=10, rep=50, return_mode="median")
        os.environ.pop("TK_MLP_DW")
        say(f"{C:>5}{ms['splitk']:9.3f}{ms['streamk']:9.3f}{ms['eager']:9.3f}  {ms['eager'] / ms['splitk']:11.3f}x"
            f" {ms['eager'] / ms['streamk']:11.3f}x")
        del x, params, dy
        torch.cuda.empty_cache()


def main():
    if not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9:
        raise SystemExit("check_mlp_dw: needs an sm_90 GPU")
    from tk_kernels.families.mlp import ops
    t0 = time.time()
    ext = ops._ext()
    say(f"mlp family loaded in {time.time() - t0:.0f}s")
    t0 = time.time()
    ok = check(ext)
    ok &= check_mlp()
    say(f"checks {'ok' if ok else 'FAILED'} ({time.time() - t0:.0f}s)")
    time_gemms(ext, [(768, 3072, 16384), (3072, 768, 16384), (1024, 4096, 16384), (4096, 1024, 16384)])
    time_pairs(ext, [768, 1024], 16384)
    time_mlp([768, 1024], 16384)
    say(f"total {time.time() - t0:.0f}s after the family load")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
