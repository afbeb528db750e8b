"""Build the attention family, check the sm_90a forward (csrc/hopper_forward.cu) against a float64
reference, and time it beside the portable forward and SDPA's cuDNN and flash backends.

    python dev/hopper/check_attention.py              # on an H100 / H200 (about 2-4 minutes incl. build)
    python dev/hopper/check_attention.py --quick      # fewer accuracy cases, three timing shapes

Accuracy: o and lse of both of our forwards vs float64 attention of the same 16-bit inputs, with q, k,
v the (B, H, T, D) views of one (B, T, 3, H, D) tensor (nanoGPT's layout, strided, no copies), odd
B*H, T in {1, 17, 255, 1000, 2048}, D 64 / 128, causal or not, bf16 / fp16, plus a custom scale. o
passes when its rel-L2 error <= max(2 x SDPA's, 4e-3 bf16 / 6e-4 fp16) and lse when its max abs error
< 2e-3 (the GPU tests' tolerances). A few cases also run the (portable) backward on the Hopper
forward's o and lse and check dq, dk, dv the same way. Output is poisoned with NaN first (unwritten
elements fail).
Timing: median of triton's do_bench, forward only, bf16, contiguous (B, H, T, D) q/k/v (--strided:
the qkv views),
TFLOP/s = 4 B H T^2 D (halved when causal); ratios are ours(hopper) / peer.
Exit status 1 if any check fails.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import threading
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

FLOOR = {torch.bfloat16: 4e-3, torch.float16: 6e-4}
LSE_TOL = 2e-3
SHAPES = [(16, 12, 1024, 64), (8, 16, 2048, 64), (4, 16, 4096, 64), (8, 16, 2048, 128), (4, 16, 4096, 128),
          (2, 16, 8192, 128), (1, 16, 16384, 128), (64, 6, 256, 64)]
QUICK_SHAPES = [(16, 12, 1024, 64), (8, 16, 2048, 128), (64, 6, 256, 64)]


_progress = {"label": "start", "t": time.time(), "limit": 60.0}


def progress(label: str, limit_s: float = 60.0) -> None:
    _progress.update(label=label, t=time.time(), limit=limit_s)


def watchdog() -> None:
    """Exit the process if one step takes longer than its limit (a kernel that deadlocks on its
    barriers would otherwise hang the GPU run)."""
    def run():
        while True:
            time.sleep(2)
            if time.time() - _progress["t"] > _progress["limit"]:
                print(f"\nHANG: no progress for {_progress['limit']:.0f} s in: {_progress['label']}", flush=True)
                os._exit(3)
    threading.Thread(target=run, daemon=True).start()


def qkv_views(B, H, T, D, dtype, seed, scale=1.0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    qkv = (torch.randn((B, T, 3, H, D), generator=g, device="cuda") * scale).to(dtype)
    return qkv.permute(2, 0, 3, 1, 4).unbind(0)


def reference(q, k, v, causal, scale):
    q, k, v = q.double(), k.double(), v.double()
    s = (q @ k.transpose(-2, -1)) * scale
    if causal:
        T = q.shape[-2]
        s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.exp(s - lse[..., None]) @ v, lse


def rel_err(x, ref):
    denom = max(ref.norm().item(), 1e-3 * math.sqrt(ref.numel()))
    return (x.double() - ref).norm().item() / denom


def poison_fwd(q):
    B, H, T, D = q.shape
    blocks = [torch.full((B * H * T * D * q.element_size(),), 255, dtype=torch.uint8, device="cuda"),
              torch.full((B * H * T * 4,), 255, dtype=torch.uint8, device="cuda")]
    del blocks


def check_forward(ext, quick: bool) -> int:
    failures = 0
    Ts = [1, 17, 255, 1000, 2048] if not quick else [17, 1000]
    cases = []
    for dtype in (torch.bfloat16, torch.float16):
        for D in (64, 128):
            for causal in (True, False):
                for T in Ts:
                    B, H = (3, 5) if T <= 255 else (1, 3)
                    cases.append((B, H, T, D, causal, dtype, None))
    cases += [(3, 1, 300, 64, True, torch.bfloat16, 0.05), (1, 3, 777, 128, False, torch.float16, 0.4)]
    print(f"accuracy: {len(cases)} cases, o rel-L2 (ours / sdpa, tol) and lse max abs error")
    for i, (B, H, T, D, causal, dtype, scale) in enumerate(cases):
        q, k, v = qkv_views(B, H, T, D, dtype, seed=1000 + i)
        sc = scale if scale is not None else 1.0 / math.sqrt(D)
        o_ref, lse_ref = reference(q, k, v, causal, sc)
        o_sdpa = F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sc)
        e_sdpa = rel_err(o_sdpa, o_ref)
        tol = max(2 * e_sdpa, FLOOR[dtype])
        line = f"  B={B} H={H} T={T:5d} D={D:3d} {'causal' if causal else 'full  '} {str(dtype)[6:]:8s}" \
               f"{'' if scale is None else f' scale={scale}'}"
        for name, run in (("hopper", lambda: ext.attention_forward_hopper(q, k, v, causal, sc, 0.0)),
                          ("portable", lambda: ext.attention_forward(q, k, v, causal, sc, 0.0))):
            poison_fwd(q)
            progress(f"{name} forward {line.strip()}")
            try:
                o, lse, _ = run()
                torch.cuda.synchronize()
            except RuntimeError as e:
                line += f" | {name}: ERROR {str(e).splitlines()[0]}"
                failures += 1
                continue
            finite = bool(torch.isfinite(o).all()) and bool(torch.isfinite(lse).all())
            eo = rel_err(o, o_ref) if finite else float("nan")
            el = (lse.double() - lse_ref).abs().max().item() if finite else float("nan")
            ok = finite and eo <= tol and el < LSE_TOL and o.stride() == (T * H * D, D, H * D, 1)
            failures += not ok
            line += f" | {name} o {eo:.2e} lse {el:.1e}{'' if ok else ' WRONG'}"
        print(line + f" | sdpa o {e_sdpa:.2e} (tol {tol:.1e})", flush=True)
    return failures


def check_backward(ext, quick: bool) -> int:
    """The portable backward on the Hopper forward's o and lse (what autograd does on sm_90)."""
    failures = 0
    cases = [(2, 3, 1000, 64, True), (1, 3, 1000, 128, False)] + ([] if quick else [(3, 5, 17, 64, False),
                                                                                    (1, 3, 2048, 128, True)])
    print("backward on the Hopper forward's o / lse: dq, dk, dv rel-L2 (ours / sdpa)")
    for i, (B, H, T, D, causal) in enumerate(cases):
        dtype = torch.bfloat16
        q, k, v = qkv_views(B, H, T, D, dtype, seed=2000 + i)
        g = torch.Generator(device="cuda").manual_seed(3000 + i)
        dout = torch.randn((B, H, T, D), generator=g, device="cuda").to(dtype)
        sc = 1.0 / math.sqrt(D)
        q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
        o64, _ = reference(q64, k64, v64, causal, sc)
        refs = torch.autograd.grad(o64, (q64, k64, v64), dout.double())
        progress(f"backward check {(B, H, T, D, causal)}")
        o, lse, rng = ext.attention_forward_hopper(q, k, v, causal, sc, 0.0)
        grads = ext.attention_backward(q, k, v, o, lse, dout, causal, sc, False, 0.0, rng)
        qs, ks, vs = (t.detach().requires_grad_() for t in (q, k, v))
        os_ = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, scale=sc)
        sd = torch.autograd.grad(os_, (qs, ks, vs), dout)
        line = f"  B={B} H={H} T={T:5d} D={D:3d} {'causal' if causal else 'full  '}"
        for name, ours, ref, s in zip(("dq", "dk", "dv"), grads, refs, sd):
            e, es = rel_err(ours, ref), rel_err(s, ref)
            ok = bool(torch.isfinite(ours).all()) and e <= max(2 * es, FLOOR[dtype])
            failures += not ok
            line += f" | {name} {e:.2e} / {es:.2e}{'' if ok else ' WRONG'}"
        print(line)
    return failures


def bench(ext, shapes, strided=False) -> None:
    from triton.testing import do_bench
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def sdpa(backend):
        def f(q, k, v, causal, sc):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sc)
        return f

    impls = {
        "hopper": lambda q, k, v, causal, sc: ext.attention_forward_hopper(q, k, v, causal, sc, 0.0),
        "portable": lambda q, k, v, causal, sc: ext.attention_forward(q, k, v, causal, sc, 0.0),
        "cudnn": sdpa(SDPBackend.CUDNN_ATTENTION),
        "flash": sdpa(SDPBackend.FLASH_ATTENTION),
    }
    print(f"\nforward TFLOP/s (median do_bench), bf16, {'strided qkv views' if strided else 'contiguous'} "
          f"q/k/v; ratios = hopper / peer")
    head = f"{'(B,H,T,D)':18s} {'mask':6s}" + "".join(f"{n:>10s}" for n in impls) + \
           "".join(f"{'/' + n:>10s}" for n in ("portable", "cudnn", "flash"))
    print(head)
    for B, H, T, D in shapes:
        q, k, v = qkv_views(B, H, T, D, torch.bfloat16, seed=7)
        if not strided:
            q, k, v = (t.contiguous() for t in (q, k, v))
        sc = 1.0 / math.sqrt(D)
        for causal in (True, False):
            flop = 4 * B * H * T * T * D / (2 if causal else 1)
            tf = {}
            for name, fn in impls.items():
                progress(f"bench {name} {(B, H, T, D)} causal={causal}")
                try:
                    fn(q, k, v, causal, sc)
                    torch.cuda.synchronize()
                    ms = do_bench(lambda: fn(q, k, v, causal, sc), warmup=25, rep=100, return_mode="median")
                    tf[name] = flop / ms / 1e9
                except RuntimeError:
                    tf[name] = float("nan")
            row = f"{str((B, H, T, D)):18s} {'causal' if causal else 'full':6s}" + "".join(
                f"{tf[n]:10.0f}" for n in impls)
            row += "".join(f"{tf['hopper'] / tf[n]:10.2f}" for n in ("portable", "cudnn", "flash"))
            print(row, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer accuracy cases and timing shapes")
    ap.add_argument("--no-bench", action="store_true", help="accuracy only")
    ap.add_argument("--strided", action="store_true", help="time on nanoGPT's strided qkv views (default: "
                    "contiguous (B, H, T, D), like bench/bench_attention.py)")
    args = ap.parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("needs an sm_90 GPU (H100 / H200)")
        return 2
    t0 = time.time()
    progress("build", limit_s=1200.0)
    watchdog()
    from tk_kernels.build import load_extension
    ext = load_extension("attention")
    print(f"extension ready in {time.time() - t0:.0f} s, archs {getattr(ext, 'tk_archs', '?')}; "
          f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    from tk_kernels.families.attention import ops as tka
    q = torch.empty(1, 1, 1, 64, device="cuda", dtype=torch.bfloat16)
    print(f"ops.forward_path (TK_ATTENTION_PATH={os.environ.get('TK_ATTENTION_PATH', '')!r}): "
          f"{tka.forward_path(q)}")
    failures = check_forward(ext, args.quick)
    failures += check_backward(ext, args.quick)
    print(f"\n{'ALL CHECKS PASSED' if failures == 0 else f'{failures} CHECKS FAILED'}", flush=True)
    if not args.no_bench:
        bench(ext, QUICK_SHAPES if args.quick else SHAPES, strided=args.strided)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
