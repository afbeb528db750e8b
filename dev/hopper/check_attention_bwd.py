"""Build the attention family, check the sm_90a backward (csrc/hopper_backward.cu) against a float64
reference and against the portable backward, and time it beside the portable backward and SDPA's
cuDNN and flash backends.

    python dev/hopper/check_attention_bwd.py            # on an H100 / H200 (< 2 minutes after the build)
    python dev/hopper/check_attention_bwd.py --no-bench # accuracy only

Accuracy: dq, dk, dv of attention_backward_hopper and of the portable attention_backward, both on the
Hopper forward's o and lse, vs float64 autograd of the same 16-bit inputs. q, k, v are nanoGPT's views
(qkv.split(C, dim=2) of one (B, T, 3C) tensor, .view(B, T, H, D).transpose(1, 2): strided, no copies),
odd B*H, T in {1, 17, 255, 1000, 2048}, D 64 / 128, causal or not, bf16 / fp16, plus two custom scales,
plus causal T = 1000 with 33 and 65 heads at both D (several launch groups of the grouped causal order:
D = 64 1 / 2 groups, D = 128 2 / 3 on a 50 MB L2) and one non-causal 65-head D = 128 case. Each line
names the kernel's loop form (plain / pipe, fixed per (D, causal) in hopper_backward.cu) and, causal, its
number of launch groups.
A gradient passes when its rel-L2 error <= tol = max(2 x the portable backward's, 1e-2 bf16 / 2e-3
fp16) and its rel-L2 difference from the portable backward's (printed after ~) is <= 2 tol; columns:
hopper error / portable error ~difference. Outputs are poisoned with NaN before every
launch (unwritten elements fail). One case also goes through autograd (tk_kernels attention with
TK_ATTENTION_BWD=hopper) and must give the direct call's dk, dv bitwise.
Timing: median of triton's do_bench, bf16, contiguous (B, H, T, D) q/k/v, backward alone and
forward + backward; TFLOP/s with the backward counted as 2.5x the forward's 4 B H T^2 D (halved when
causal). SDPA's backward is timed as torch.autograd.grad on a retained graph. "dev" is what the chosen
loop form and launch order timed as dev variants (bench/RESULTS.md session 4 call 3; the kernel's header),
"x dev" the ratio: about 1.00 means the integration kept the measured speed.
Exit status 1 if any check fails (3 if a kernel hangs: the watchdog of check_attention.py).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
from check_attention import progress, watchdog  # noqa: E402

FLOOR = {torch.bfloat16: 1e-2, torch.float16: 2e-3}
TS = [1, 17, 255, 1000, 2048]
SHAPES = [(16, 12, 1024, 64), (8, 16, 2048, 64), (8, 16, 2048, 128), (4, 16, 4096, 128), (64, 6, 256, 64)]
# backward alone, TFLOP/s of the loop form + launch order hopper_backward.cu picks per (D, causal), as timed
# on the dev variants (H200, session 4 call 3): (B, H, T, D, causal) -> TFLOP/s
DEV_TFLOPS = {(16, 12, 1024, 64, True): 199, (16, 12, 1024, 64, False): 288,
              (8, 16, 2048, 64, True): 265, (8, 16, 2048, 64, False): 347,
              (8, 16, 2048, 128, True): 384, (8, 16, 2048, 128, False): 474,
              (4, 16, 4096, 128, True): 414, (4, 16, 4096, 128, False): 510,
              (64, 6, 256, 64, True): 75, (64, 6, 256, 64, False): 134}


def loop_form(D: int, causal: bool) -> str:
    """The query-block loop hopper_backward.cu uses (hb_pipelined there)."""
    return "pipe" if D == 128 or causal else "plain"


def launch_groups(heads: int, T: int, D: int) -> int:
    """Launch groups of a causal grid: heads per group as hopper_backward.cu's launcher computes it."""
    l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0)
    group = max(1, min(heads, (l2 // 2) // (8 * T * D)))
    return -(-heads // group)


def nanogpt_qkv(B, H, T, D, dtype, g):
    """q, k, v as model.py makes them: split of one (B, T, 3C) tensor, then (B, H, T, D) views."""
    C = H * D
    qkv = torch.randn((B, T, 3 * C), generator=g, device="cuda").to(dtype)
    q, k, v = qkv.split(C, dim=2)
    return tuple(t.view(B, T, H, D).transpose(1, 2) for t in (q, k, v))


def reference_grads(q, k, v, dout, causal, scale):
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    s = (q64 @ k64.transpose(-2, -1)) * scale
    if causal:
        T = q.shape[-2]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    o = torch.softmax(s, dim=-1) @ v64
    return torch.autograd.grad(o, (q64, k64, v64), dout.double())


def rel_err(x, ref):
    denom = max(ref.norm().item(), 1e-3 * math.sqrt(ref.numel()))
    return (x.double() - ref.double()).norm().item() / denom


def poison(q):
    """NaN-filled blocks of the output sizes (dq, dk, dv) and of the larger workspaces left in the caching
    allocator, so outputs the kernels fail to write stay NaN."""
    B, H, T, D = q.shape
    n = B * H * T * D * q.element_size()
    blocks = [torch.full((n,), 255, dtype=torch.uint8, device="cuda") for _ in range(3)]
    del blocks


def check_accuracy(ext) -> int:
    failures = 0
    cases = []
    for dtype in (torch.bfloat16, torch.float16):
        for D in (64, 128):
            for causal in (True, False):
                for T in TS:
                    B, H = (3, 5) if T <= 255 else (1, 3)
                    cases.append((B, H, T, D, causal, dtype, None))
    cases += [(3, 1, 300, 64, True, torch.bfloat16, 0.05), (1, 3, 777, 128, False, torch.float16, 0.3)]
    # more heads than one launch group of the grouped causal order holds (the last group partial)
    cases += [(B, H, 1000, D, True, dtype, None) for D in (64, 128) for (B, H), dtype in
              (((3, 11), torch.bfloat16), ((5, 13), torch.float16))]
    cases += [(5, 13, 1000, 128, False, torch.bfloat16, None)]
    print(f"accuracy: {len(cases)} cases; rel-L2 vs float64 of hopper / portable, and hopper vs portable")
    for i, (B, H, T, D, causal, dtype, scale) in enumerate(cases):
        g = torch.Generator(device="cuda").manual_seed(4000 + i)
        q, k, v = nanogpt_qkv(B, H, T, D, dtype, g)
        dout = torch.randn((B, H, T, D), generator=g, device="cuda").to(dtype)
        sc = scale if scale is not None else 1.0 / math.sqrt(D)
        refs = reference_grads(q, k, v, dout, causal, sc)
        o, lse, rng = ext.attention_forward_hopper(q, k, v, causal, sc, 0.0)
        line = f"  B={B} H={H:2d} T={T:5d} D={D:3d} {'causal' if causal else 'full  '} {str(dtype)[6:]:8s}" \
               f" {loop_form(D, causal):5s} {f'{launch_groups(B * H, T, D)} gr' if causal else '    '}" \
               f"{'' if scale is None else f' scale={scale}'}"
        progress(f"hopper backward {line.strip()}", limit_s=20.0)
        try:
            poison(q)
            hop = ext.attention_backward_hopper(q, k, v, o, lse, dout, causal, sc, 0.0, rng)
            torch.cuda.synchronize()
        except RuntimeError as e:
            msg = str(e).splitlines()[0]
            print(line + f" | hopper ERROR {msg}", flush=True)
            if "CUDA error" in msg or "illegal" in msg:  # the context is gone: nothing else can run
                print("\nCHECKS FAILED: a CUDA error in the Hopper backward", flush=True)
                sys.exit(1)
            failures += 1
            continue
        progress(f"portable backward {line.strip()}")
        poison(q)
        por = ext.attention_backward(q, k, v, o, lse, dout, causal, sc, False, 0.0, rng)
        torch.cuda.synchronize()
        for name, h, p, r in zip(("dq", "dk", "dv"), hop, por, refs):
            finite = bool(torch.isfinite(h).all())
            eh = rel_err(h, r) if finite else float("nan")
            ep = rel_err(p, r)
            tol = max(2 * ep, FLOOR[dtype])
            ehp = rel_err(h, p) if finite else float("nan")
            ok = finite and eh <= tol and ehp <= 2 * tol and h.shape == r.shape and h.stride() == p.stride()
            failures += not ok
            line += f" | {name} {eh:.1e}/{ep:.1e} ~{ehp:.0e}{'' if ok else ' WRONG'}"
        print(line, flush=True)
    return failures


def check_autograd(ext) -> int:
    """tk_kernels attention + autograd with TK_ATTENTION_BWD=hopper routes to the Hopper backward."""
    from tk_kernels.families.attention import ops as tka
    g = torch.Generator(device="cuda").manual_seed(99)
    B, H, T, D, causal = 2, 3, 333, 64, True
    q, k, v = nanogpt_qkv(B, H, T, D, torch.bfloat16, g)
    dout = torch.randn((B, H, T, D), generator=g, device="cuda").to(torch.bfloat16)
    sc = 1.0 / math.sqrt(D)
    old = os.environ.get("TK_ATTENTION_BWD")
    os.environ["TK_ATTENTION_BWD"] = "hopper"
    try:
        path = tka.backward_path(q, 0.0, False, k, v)
        qs, ks, vs = (t.detach().requires_grad_() for t in (q, k, v))
        y = tka.attention(qs, ks, vs, causal=causal)
        grads = torch.autograd.grad(y, (qs, ks, vs), dout)
    finally:
        if old is None:
            os.environ.pop("TK_ATTENTION_BWD")
        else:
            os.environ["TK_ATTENTION_BWD"] = old
    o, lse, rng = ext.attention_forward_hopper(q, k, v, causal, sc, 0.0)
    direct = ext.attention_backward_hopper(q, k, v, o, lse, dout, causal, sc, 0.0, rng)
    same = all(torch.equal(a, b) for a, b in zip(grads[1:], direct[1:]))
    dq_err = rel_err(grads[0], direct[0])
    ok = path == "hopper" and same and dq_err < 1e-2
    print(f"autograd with TK_ATTENTION_BWD=hopper: backward_path={path}, dk/dv bitwise equal to the direct "
          f"call: {same}, dq rel diff {dq_err:.1e}{'' if ok else ' WRONG'}")
    return 0 if ok else 1


def bench(ext) -> None:
    from triton.testing import do_bench
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def ms_of(fn):
        fn()
        torch.cuda.synchronize()
        return do_bench(fn, warmup=10, rep=40, return_mode="median")

    print("\nTFLOP/s (bf16, contiguous q/k/v; backward = 2.5x forward FLOPs); bwd alone | fwd+bwd; "
          "x = hopper / peer; dev = the chosen form's dev-variant time, x dev = hopper / dev")
    names = ("hopper", "portable", "cudnn", "flash")
    head = f"{'(B,H,T,D)':18s} {'mask':6s}" + "".join(f"{n:>9s}" for n in names) + \
        f"{'x cudnn':>9s}{'x flash':>9s}{'dev':>6s}{'x dev':>7s} {'form':10s}|" + \
        "".join(f"{n:>9s}" for n in names) + f"{'x cudnn':>9s}"
    print(head)
    for B, H, T, D in SHAPES:
        g = torch.Generator(device="cuda").manual_seed(7)
        q, k, v = (torch.randn((B, H, T, D), generator=g, device="cuda").to(torch.bfloat16) for _ in range(3))
        dout = torch.randn((B, H, T, D), generator=g, device="cuda").to(torch.bfloat16)
        sc = 1.0 / math.sqrt(D)
        for causal in (True, False):
            fwd_flop = 4 * B * H * T * T * D / (2 if causal else 1)
            bwd, both = {}, {}
            o, lse, rng = ext.attention_forward_hopper(q, k, v, causal, sc, 0.0)
            ours = {
                "hopper": (lambda: ext.attention_backward_hopper(q, k, v, o, lse, dout, causal, sc, 0.0, rng),
                           lambda: ext.attention_backward_hopper(
                               q, k, v, *ext.attention_forward_hopper(q, k, v, causal, sc, 0.0)[:2], dout, causal, sc, 0.0, rng)),
                "portable": (lambda: ext.attention_backward(q, k, v, o, lse, dout, causal, sc, False, 0.0, rng),
                             lambda: ext.attention_backward(
                                 q, k, v, *ext.attention_forward(q, k, v, causal, sc, 0.0)[:2], dout, causal, sc,
                                 False, 0.0, rng)),
            }
            for name, (fb, ff) in ours.items():
                progress(f"bench {name} {(B, H, T, D)} causal={causal}", limit_s=30.0)
                try:
                    bwd[name] = 2.5 * fwd_flop / ms_of(fb) / 1e9
                    both[name] = 3.5 * fwd_flop / ms_of(ff) / 1e9
                except RuntimeError:
                    bwd[name] = both[name] = float("nan")
            qs, ks, vs = (t.detach().requires_grad_() for t in (q, k, v))
            for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
                progress(f"bench {name} {(B, H, T, D)} causal={causal}")
                try:
                    with sdpa_kernel(backend):
                        y = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, scale=sc)
                        bwd[name] = 2.5 * fwd_flop / ms_of(
                            lambda: torch.autograd.grad(y, (qs, ks, vs), dout, retain_graph=True)) / 1e9

                        def step():
                            yy = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, scale=sc)
                            return torch.autograd.grad(yy, (qs, ks, vs), dout)
                        both[name] = 3.5 * fwd_flop / ms_of(step) / 1e9
                    del y
                except RuntimeError:
                    bwd[name] = both[name] = float("nan")
            row = f"{str((B, H, T, D)):18s} {'causal' if causal else 'full':6s}" + \
                "".join(f"{bwd[n]:9.0f}" for n in names) + \
                f"{bwd['hopper'] / bwd['cudnn']:9.2f}{bwd['hopper'] / bwd['flash']:9.2f}" + \
                f"{DEV_TFLOPS[(B, H, T, D, causal)]:6d}{bwd['hopper'] / DEV_TFLOPS[(B, H, T, D, causal)]:7.2f} " + \
                f"{loop_form(D, causal) + (f' {launch_groups(B * H, T, D)}gr' if causal else ''):10s}|" + \
                "".join(f"{both[n]:9.0f}" for n in names) + f"{both['hopper'] / both['cudnn']:9.2f}"
            print(row, flush=True)


def kernel_breakdown(ext) -> None:
    """Per-kernel GPU time of one Hopper backward call (torch profiler), for the next tuning step."""
    from torch.profiler import ProfilerActivity, profile
    for B, H, T, D, causal in ((8, 16, 2048, 128, False), (16, 12, 1024, 64, True)):
        g = torch.Generator(device="cuda").manual_seed(8)
        q, k, v, dout = (torch.randn((B, H, T, D), generator=g, device="cuda").to(torch.bfloat16) for _ in range(4))
        sc = 1.0 / math.sqrt(D)
        o, lse, rng = ext.attention_forward_hopper(q, k, v, causal, sc, 0.0)
        for _ in range(3):
            ext.attention_backward_hopper(q, k, v, o, lse, dout, causal, sc, 0.0, rng)
        torch.cuda.synchronize()
        n = 5
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(n):
                ext.attention_backward_hopper(q, k, v, o, lse, dout, causal, sc, 0.0, rng)
            torch.cuda.synchronize()
        times: dict[str, float] = {}
        for e in prof.events():
            if e.device_type == torch.autograd.DeviceType.CUDA:
                name = e.name.split("(")[0].split("<")[0].split("::")[-1][:40]
                times[name] = times.get(name, 0.0) + e.device_time / n
        total = sum(times.values())
        parts = ", ".join(f"{k} {v:.0f} us" for k, v in sorted(times.items(), key=lambda kv: -kv[1]))
        print(f"kernels of one Hopper backward {(B, H, T, D)} {'causal' if causal else 'full'}: "
              f"{total:.0f} us = {parts}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--no-bench", action="store_true", help="accuracy only")
    args = ap.parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("needs an sm_90 GPU (H100 / H200)")
        return 2
    t0 = time.time()
    progress("build", limit_s=1200.0)
    watchdog()
    from tk_kernels.build import load_extension
    ext = load_extension("attention")
    t1 = time.time()
    print(f"extension ready in {t1 - t0:.0f} s, archs {getattr(ext, 'tk_archs', '?')}; torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}", flush=True)
    failures = check_accuracy(ext)
    progress("autograd check")
    failures += check_autograd(ext)
    print(f"\n{'ALL CHECKS PASSED' if failures == 0 else f'{failures} CHECKS FAILED'} "
          f"({time.time() - t1:.0f} s)", flush=True)
    if not args.no_bench:
        bench(ext)
        progress("kernel breakdown")
        try:
            kernel_breakdown(ext)
        except Exception as e:  # a diagnostic extra: report and go on
            print(f"kernel breakdown failed: {str(e).splitlines()[0][:200]}")
    print(f"total after the build: {time.time() - t1:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
