"""
The cost of attention dropout: forward + backward at dropout p vs p = 0, ours and PyTorch SDPA's
flash and cuDNN backends side by side (a backend without dropout support shows "n/a").

    python bench/bench_attention_dropout.py                  # the issue's two shapes, p = 0.2, bf16
    python bench/bench_attention_dropout.py --p 0.1 --json out.json
    python bench/bench_attention_dropout.py --graphs         # CUDA-graph replays: GPU time, no host costs

Per (shape, implementation): the median time of one forward + backward (torch.autograd.grad of
o on q, k, v), at p = 0 and at p, and the overhead (t_p / t_0 - 1) in %. Target for ours: <= 10%.
The forward alone is timed too (under no_grad), so the overhead splits into forward and backward.
"tk" is the path a plain call takes (on an H100 / H200 the Hopper kernels, dropout included; TK_ATTENTION_PATH
/ TK_ATTENTION_BWD as set), "tk-portable" the portable kernels forced (TK_ATTENTION_PATH=portable,
TK_ATTENTION_BWD=portable for its calls).
Timing as in bench_attention.py (triton.testing.do_bench, or CUDA events); with --graphs each timed step is
captured once in a CUDA graph and replayed (the dropout's seed and offset advance per replay, as in a step
under torch.compile's CUDA graphs): at (64,6,256,64) the eager timing is host-bound (session 8: +79.6% eager,
against 0.081 ms of GPU time per backward call in the train-step profile).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (REPO_ROOT, os.path.join(REPO_ROOT, "bench")):
    if path not in sys.path:
        sys.path.insert(0, path)

from bench_attention import bench_ms, environment, graphed, short_error  # noqa: E402

SHAPES = [(16, 12, 1024, 64), (64, 6, 256, 64)]  # (B, H, T, D), causal: GPT-2 small, shakespeare_char
IMPLS = ("tk", "tk-portable", "flash", "cudnn")


def make_impl(name: str):
    """name -> fn(q, k, v, dropout_p) -> o (causal)."""
    if name in ("tk", "tk-portable"):
        from tk_kernels.families.attention import ops as tka
        reason = tka.unavailable_reason()
        if reason is not None:
            raise RuntimeError(reason)
        if name == "tk":
            return lambda q, k, v, p: tka.attention(q, k, v, causal=True, dropout_p=p)

        def portable(q, k, v, p):
            # forward now, backward later (autograd): both read the environment when they run
            os.environ["TK_ATTENTION_PATH"] = os.environ["TK_ATTENTION_BWD"] = "portable"
            return tka.attention(q, k, v, causal=True, dropout_p=p)
        return portable
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}[name]

    def sdpa(q, k, v, p):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
    return sdpa


def timed_ms(step, graphs: bool) -> float:
    step()  # fails here (not inside the timer or a capture) if the backend cannot run this
    return bench_ms(graphed(step) if graphs else step)[0]


def fwd_bwd_ms(fn, q, k, v, dout, p, graphs=False) -> float:
    def step():
        o = fn(q, k, v, p)
        torch.autograd.grad(o, (q, k, v), dout)
    return timed_ms(step, graphs)


def fwd_ms(fn, q, k, v, p, graphs=False) -> float:
    """The forward alone (no graph kept): splits the overhead into forward and backward."""
    def step():
        with torch.no_grad():
            fn(q, k, v, p)
    return timed_ms(step, graphs)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--p", type=float, default=0.2, help="dropout probability (default 0.2)")
    ap.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    ap.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated subset of {','.join(IMPLS)}")
    ap.add_argument("--json", help="write the results to this JSON file")
    ap.add_argument("--graphs", action="store_true", help="time CUDA-graph replays of each step (GPU time only)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_attention_dropout: needs a CUDA GPU")
        return 1
    if not 0.0 < args.p < 1.0:
        print(f"bench_attention_dropout: --p must be in (0, 1), got {args.p}")
        return 2
    impls = [s.strip() for s in args.impls.split(",") if s.strip()]
    bad = [s for s in impls if s not in IMPLS]
    if bad:
        print(f"bench_attention_dropout: unknown implementation(s) {bad}; choose from {', '.join(IMPLS)}")
        return 2
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    env = environment()
    env["timing"] = "CUDA-graph replays" if args.graphs else "eager calls"
    print(f"{env['gpu']} (cc {env['capability']}), torch {env['torch']}, {args.dtype}, causal, "
          f"fwd+bwd ms, dropout p = {args.p} vs 0, timer {env['timer']}, {env['timing']}")
    results = []
    torch.manual_seed(0)
    for (B, H, T, D) in SHAPES:
        qkv = torch.randn(B, T, 3, H, D, device="cuda", dtype=dtype)  # nanoGPT's strided q, k, v
        q, k, v = (t.detach().requires_grad_() for t in qkv.permute(2, 0, 3, 1, 4).unbind(0))
        dout = torch.randn(B, H, T, D, device="cuda", dtype=dtype)
        for name in impls:
            saved = {k: os.environ.get(k) for k in ("TK_ATTENTION_PATH", "TK_ATTENTION_BWD")}
            row = {"shape": [B, H, T, D], "impl": name, "p": args.p}
            try:
                fn = make_impl(name)
                row["ms_p0"] = fwd_bwd_ms(fn, q, k, v, dout, 0.0, args.graphs)
                row["ms_p"] = fwd_bwd_ms(fn, q, k, v, dout, args.p, args.graphs)
                row["overhead_pct"] = 100.0 * (row["ms_p"] / row["ms_p0"] - 1.0)
                row["fwd_ms_p0"] = fwd_ms(fn, q, k, v, 0.0, args.graphs)
                row["fwd_ms_p"] = fwd_ms(fn, q, k, v, args.p, args.graphs)
            except Exception as e:  # a backend without dropout (or this shape): n/a
                row["error"] = short_error(e)
            for key, val in saved.items():  # (tk-portable set them)
                if val is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = val
            results.append(row)
    print(f"{'shape (B,H,T,D)':<20} {'impl':<11} {'p=0 ms':>8} {f'p={args.p} ms':>10} {'overhead':>9}"
          f"   {'fwd p=0':>8} {'fwd p':>8} {'bwd p=0':>8} {'bwd p':>8}  (fwd alone; bwd = fwd+bwd - fwd)")
    for r in results:
        shape = "x".join(map(str, r["shape"]))
        if "error" in r:
            print(f"{shape:<20} {r['impl']:<11} {'n/a':>8} {'n/a':>10} {'':>9}  ({r['error']})")
        else:
            print(f"{shape:<20} {r['impl']:<11} {r['ms_p0']:8.3f} {r['ms_p']:10.3f} {r['overhead_pct']:+8.1f}%"
                  f"   {r['fwd_ms_p0']:8.3f} {r['fwd_ms_p']:8.3f} {r['ms_p0'] - r['fwd_ms_p0']:8.3f}"
                  f" {r['ms_p'] - r['fwd_ms_p']:8.3f}")
    for impl in ("tk", "tk-portable"):
        tk_rows = [r for r in results if r["impl"] == impl and "overhead_pct" in r]
        if tk_rows:
            worst = max(r["overhead_pct"] for r in tk_rows)
            print(f"{impl} dropout overhead: worst {worst:+.1f}% (target <= 10%)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"env": env, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
