"""
Attention benchmark: our tk kernels vs PyTorch SDPA's flash, cuDNN and memory-efficient backends,
forward and backward, causal and not, all in one process.

    python bench/bench_attention.py                                  # the issue's shapes, bf16
    python bench/bench_attention.py --shapes small                   # a quick run
    python bench/bench_attention.py --json out.json --png out.png    # also save results + a plot
    python bench/bench_attention.py --graphs                         # time CUDA-graph replays (GPU time)
    python bench/bench_attention.py --graphs --rounds 3              # each case 3 times, order rotated, medians

Timings are medians (with 20th/80th percentiles) of CUDA-event measurements from
triton.testing.do_bench (warm-up first, L2 cache flushed between runs), or of our own CUDA-event loop
if triton is missing. TFLOP/s counts forward = 4*B*H*T^2*D (halved when causal) and backward =
2.5 x forward. The backward is timed alone: the forward runs once, then
torch.autograd.grad(o, (q, k, v), do, retain_graph=True) is timed.
Each shape also gets a correctness spot-check (our output and gradients vs SDPA flash), so a
fast-but-wrong kernel is flagged in the table. A backend that fails on a shape shows "n/a".
With --graphs every timed call (our op or SDPA's, and autograd.grad for the backward) is captured once in
a CUDA graph and the replays are timed: the kernels' GPU time without Python, dispatch or launch costs,
which decide the eager timing of short calls (at (64,6,256,64) the eager backward of both ours and cuDNN
is host-bound: 0.18-0.20 ms against ~0.08 / 0.065 ms of GPU time in a train-step profile, session 8), and
what a step under torch.compile's CUDA graphs (reduce-overhead) pays.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import torch
import torch.nn.functional as F

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)
from bench.bench_layernorm import graphed  # noqa: E402  (fn captured once in a CUDA graph -> its replay)

SHAPES = {
    # GPT-2 124M's and GPT-2 medium's (350M) training shapes first, shakespeare_char's last
    "all": [(16, 12, 1024, 64), (16, 16, 1024, 64), (8, 16, 2048, 64), (4, 16, 4096, 64), (8, 16, 2048, 128),
            (4, 16, 4096, 128), (2, 16, 8192, 128), (1, 16, 16384, 128), (64, 6, 256, 64)],
    "small": [(16, 12, 1024, 64), (4, 16, 2048, 128)],
}
IMPLS = ("tk", "flash", "cudnn", "efficient")
CHECK_TOL = 2e-2  # relative L2 error vs SDPA flash above which a result is flagged WRONG


# -----------------------------------------------------------------------------
# implementations

def make_impl(name: str):
    """name -> fn(q, k, v, causal) -> o, or raise if the backend is unknown to this torch."""
    if name == "tk":
        from tk_kernels.families.attention import ops as tka
        reason = tka.unavailable_reason()
        if reason is not None:
            raise RuntimeError(reason)
        return lambda q, k, v, causal: tka.attention(q, k, v, causal=causal)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
               "efficient": SDPBackend.EFFICIENT_ATTENTION}[name]

    def sdpa(q, k, v, causal):
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return sdpa


# -----------------------------------------------------------------------------
# timing

def bench_ms(fn) -> tuple[float, float, float]:
    """(median, p20, p80) milliseconds of fn()."""
    try:
        from triton.testing import do_bench
    except ImportError:
        do_bench = None
    if do_bench is not None:
        med, p20, p80 = do_bench(fn, warmup=25, rep=100, quantiles=[0.5, 0.2, 0.8])
        return float(med), float(p20), float(p80)
    # fallback: our own CUDA-event loop, ~25 ms warm-up then ~100 ms of timed runs
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    est = max((time.perf_counter() - t0) / 3 * 1e3, 1e-3)
    for _ in range(max(1, int(25 / est))):
        fn()
    n = max(5, min(1000, int(100 / est)))
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = torch.tensor([s.elapsed_time(e) for s, e in zip(starts, ends)])
    q = torch.quantile(times, torch.tensor([0.5, 0.2, 0.8])).tolist()
    return q[0], q[1], q[2]


def on_side_stream(f):
    """f() run on a fresh side stream (ordered after the current stream's work, which then waits for it).
    --graphs runs the eager forward whose backward it captures this way: autograd launches a backward on its
    forward's stream, and on the default (legacy) stream that breaks the capture for every implementation
    ("operation would make the legacy stream depend on a capturing blocking stream": dev/capture_first_bwd.py;
    before, a first failed capture left its stream current, so only the first shape's first backward failed)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = f()
    torch.cuda.current_stream().wait_stream(side)
    return out


def flops(B, H, T, D, causal, mode):
    f = 4 * B * H * T * T * D * (0.5 if causal else 1.0)
    return f * (2.5 if mode == "bwd" else 1.0)


def rel_err(x, ref):
    x, ref = x.float(), ref.float()
    return ((x - ref).norm() / ref.norm().clamp_min(1e-12)).item()


def short_error(e: Exception) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0][:160] if msg else ''}"


def run_rounds(shape, causal, dtype, impls, seed, graphs=False, rounds=1):
    """run_shape `rounds` times, the implementations' order rotated each round (round r starts with the r-th), and
    each implementation's median over the rounds (its per-round medians in "rounds_ms"; the check of round 0).
    Why (session 33, H100): in one pass over all shapes our (1,16,16384,128) non-causal backward timed 474 TFLOP/s
    against cuDNN's 552, while the same two alone, twice, gave 541 / 543 against 540 / 537: a single timing per
    implementation, always in the same order, carries the card's drift into the ratios."""
    runs = []
    for r in range(rounds):
        order = impls[r % len(impls):] + impls[:r % len(impls)]
        runs.append(run_shape(shape, causal, dtype, order, seed, graphs))
    if rounds == 1:
        return runs[0]
    out = {"fwd": {}, "bwd": {}, "check": runs[0]["check"]}
    for mode in ("fwd", "bwd"):
        for name in impls:
            timed = [run[mode][name] for run in runs if "ms" in run[mode].get(name, {})]
            if not timed:
                out[mode][name] = runs[0][mode].get(name, {"error": "not run"})
                continue
            ms = statistics.median(x["ms"] for x in timed)
            out[mode][name] = {"ms": ms, "rounds_ms": [x["ms"] for x in timed],
                               "p20_ms": min(x["p20_ms"] for x in timed), "p80_ms": max(x["p80_ms"] for x in timed),
                               "tflops": flops(*shape, causal, mode) / (ms * 1e-3) / 1e12}
    return out


def run_shape(shape, causal, dtype, impls, seed, graphs=False):
    """Returns {"fwd": {impl: result}, "bwd": {...}, "check": {...}} for one shape (graphs: time replays of
    each call captured in a CUDA graph)."""
    timed = (lambda fn: bench_ms(graphed(fn))) if graphs else bench_ms
    B, H, T, D = shape
    g = torch.Generator(device="cuda").manual_seed(seed)
    q, k, v, do = (torch.randn(B, H, T, D, device="cuda", dtype=dtype, generator=g) for _ in range(4))
    out = {"fwd": {}, "bwd": {}, "check": {}}
    outputs = {}
    for name in impls:
        try:
            fn = make_impl(name)
        except Exception as e:
            for mode in ("fwd", "bwd"):
                out[mode][name] = {"error": short_error(e)}
            continue
        # forward (no autograd graph)
        try:
            with torch.no_grad():
                o = fn(q, k, v, causal)
                ms, p20, p80 = timed(lambda: fn(q, k, v, causal))
            out["fwd"][name] = {"ms": ms, "p20_ms": p20, "p80_ms": p80,
                                "tflops": flops(B, H, T, D, causal, "fwd") / (ms * 1e-3) / 1e12}
            outputs[name] = [o]
        except Exception as e:
            out["fwd"][name] = {"error": short_error(e)}
        # backward alone: forward once, then time autograd.grad
        try:
            qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
            # (graphs: on a side stream, see on_side_stream)
            o = on_side_stream(lambda: fn(qg, kg, vg, causal)) if graphs else fn(qg, kg, vg, causal)
            grads = torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True)
            ms, p20, p80 = timed(lambda: torch.autograd.grad(o, (qg, kg, vg), do, retain_graph=True))
            out["bwd"][name] = {"ms": ms, "p20_ms": p20, "p80_ms": p80,
                                "tflops": flops(B, H, T, D, causal, "bwd") / (ms * 1e-3) / 1e12}
            if name in outputs:
                outputs[name] += list(grads)
            del o, grads, qg, kg, vg
        except Exception as e:
            out["bwd"][name] = {"error": short_error(e)}
        torch.cuda.synchronize()
    # correctness spot-check: ours vs SDPA flash (and cuDNN as a second opinion)
    if "tk" in outputs:
        for peer in ("flash", "cudnn", "efficient"):
            if peer in outputs:
                errs = [rel_err(a, b) for a, b in zip(outputs["tk"], outputs[peer])]
                out["check"] = {"vs": peer, **dict(zip(("o", "dq", "dk", "dv"), errs))}
                out["check"]["ok"] = all(e <= CHECK_TOL for e in errs)
                break
    del outputs, q, k, v, do
    torch.cuda.empty_cache()
    return out


# -----------------------------------------------------------------------------
# report

def fmt_tflops(r):
    return f"{r['tflops']:7.1f}" if r and "tflops" in r else "    n/a"


def print_table(results, impls):
    head = (f"{'shape (B,H,T,D)':>22} {'causal':>6} {'pass':>4} | "
            + " ".join(f"{n:>9}" for n in impls) + " | ours/flash  ms(ours)  check")
    print("TFLOP/s (median)")
    print(head)
    print("-" * len(head))
    for r in results:
        B, H, T, D = r["shape"]
        for mode in ("fwd", "bwd"):
            res = r[mode]
            cells = " ".join(f"{fmt_tflops(res.get(n)):>9}" for n in impls)
            tk, fl = res.get("tk", {}), res.get("flash", {})
            ratio = f"{tk['tflops'] / fl['tflops']:10.2f}x" if "tflops" in tk and "tflops" in fl else "        n/a"
            ms = f"{tk['ms']:8.3f}" if "ms" in tk else "     n/a"
            chk = r.get("check", {})
            if chk:
                keys = ("o",) if mode == "fwd" else ("dq", "dk", "dv")
                worst = max(chk[k] for k in keys if k in chk) if any(k in chk for k in keys) else float("nan")
                flag = "ok" if worst <= CHECK_TOL else "WRONG"
                check = f"{flag} {worst:.1e}"
            else:
                check = "-"
            print(f"{str((B, H, T, D)):>22} {str(r['causal']):>6} {mode:>4} | {cells} | {ratio} {ms}  {check}")
    errors = sorted({f"{n}: {v['error']}" for r in results for m in ("fwd", "bwd")
                     for n, v in r[m].items() if "error" in v})
    if errors:
        print("n/a reasons:")
        for e in errors:
            print("  " + e)


def markdown_table(results, impls, env) -> str:
    """The bench/RESULTS.md section body for these results."""
    names = {"tk": "ours", "flash": "SDPA flash", "cudnn": "SDPA cuDNN", "efficient": "SDPA efficient"}
    lines = [f"torch {env['torch']}, CUDA {env['cuda']}, cuDNN {env['cudnn']}, {env['gpu']}, "
             f"dtype {results[0]['dtype'] if results else '?'}; TFLOP/s (median of {env.get('timing', 'eager calls')})", "",
             "| shape (B,H,T,D) | causal | pass | " + " | ".join(names[n] for n in impls)
             + " | ours/flash | check |",
             "|---" * (len(impls) + 5) + "|"]
    for r in results:
        for mode in ("fwd", "bwd"):
            res = r[mode]
            cells = " | ".join(fmt_tflops(res.get(n)).strip() for n in impls)
            tk, fl = res.get("tk", {}), res.get("flash", {})
            ratio = f"{tk['tflops'] / fl['tflops']:.2f}x" if "tflops" in tk and "tflops" in fl else "n/a"
            chk = r.get("check", {})
            keys = [k for k in (("o",) if mode == "fwd" else ("dq", "dk", "dv")) if k in chk]
            check = (f"{'ok' if max(chk[k] for k in keys) <= CHECK_TOL else 'WRONG'} "
                     f"{max(chk[k] for k in keys):.0e}") if keys else "-"
            shape = "(" + ",".join(map(str, r["shape"])) + ")"
            lines.append(f"| {shape} | {'yes' if r['causal'] else 'no'} | {mode} | {cells} | {ratio} | {check} |")
    return "\n".join(lines)


def write_png(results, impls, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(2, 1, figsize=(max(10, 1.6 * len(results)), 9))
    labels = [f"{r['shape'][0]},{r['shape'][1]},{r['shape'][2]},{r['shape'][3]}\n"
              f"{'causal' if r['causal'] else 'full'}" for r in results]
    width = 0.8 / len(impls)
    for ax, mode in zip(axes, ("fwd", "bwd")):
        for i, name in enumerate(impls):
            vals = [r[mode].get(name, {}).get("tflops", 0.0) for r in results]
            ax.bar([x + i * width for x in range(len(results))], vals, width, label=name)
        ax.set_xticks([x + width * (len(impls) - 1) / 2 for x in range(len(results))])
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"attention {'forward' if mode == 'fwd' else 'backward'} ({results[0]['dtype']}, "
                     f"{torch.cuda.get_device_name()})")
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def environment() -> dict:
    return {
        "gpu": torch.cuda.get_device_name(),
        "capability": ".".join(map(str, torch.cuda.get_device_capability())),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "python": platform.python_version(),
        "timer": "triton.testing.do_bench" if _has_triton() else "cuda events",
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _has_triton() -> bool:
    try:
        import triton.testing  # noqa: F401
        return True
    except ImportError:
        return False


def parse_shapes(text: str):
    if text in SHAPES:
        return SHAPES[text]
    shapes = []
    for part in text.split(";"):
        dims = tuple(int(x) for x in part.split(","))
        if len(dims) != 4:
            raise argparse.ArgumentTypeError(f"shape {part!r} must be B,H,T,D")
        shapes.append(dims)
    return shapes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="all", type=parse_shapes,
                    help="'all' (default), 'small', or 'B,H,T,D;B,H,T,D;...'")
    ap.add_argument("--causal", choices=("both", "true", "false"), default="both")
    ap.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    ap.add_argument("--impls", default=",".join(IMPLS), help=f"comma-separated subset of {','.join(IMPLS)}")
    ap.add_argument("--json", help="write all results to this JSON file")
    ap.add_argument("--png", help="write a bar plot to this PNG file (needs matplotlib)")
    ap.add_argument("--graphs", action="store_true", help="time CUDA-graph replays of each call (GPU time only)")
    ap.add_argument("--rounds", type=int, default=1, help="time every case this many times, the implementations' "
                    "order rotated each round, and report each one's median over the rounds (default 1)")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be >= 1")
    if not torch.cuda.is_available():
        print("bench_attention: needs a CUDA GPU", file=sys.stderr)
        return 1
    impls = [n.strip() for n in args.impls.split(",") if n.strip()]
    for n in impls:
        if n not in IMPLS:
            ap.error(f"unknown impl {n!r}; choose from {', '.join(IMPLS)}")
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[args.dtype]
    causals = {"both": (True, False), "true": (True,), "false": (False,)}[args.causal]
    env = environment()
    env["timing"] = "CUDA-graph replays" if args.graphs else "eager calls"
    if args.rounds > 1:
        env["timing"] += f", median of {args.rounds} rounds in rotated order"
    print(" ".join(f"{k}={v}" for k, v in env.items()), flush=True)

    if "tk" in impls:  # build/load up front so the build time is not mistaken for a hang
        t0 = time.time()
        try:
            make_impl("tk")
            from tk_kernels.families.attention import ops as tka
            q1 = torch.empty(1, 1, 1, 64, device="cuda", dtype=dtype)
            path, bwd_path = tka.forward_path(q1), tka.backward_path(q1)
            print(f"tk kernels ready ({time.time() - t0:.1f}s); tk forward path: {path}, backward path: "
                  f"{bwd_path} (TK_ATTENTION_PATH=hopper|portable, TK_ATTENTION_BWD force them)", flush=True)
            if os.environ.get("TK_SMEM_LIMIT") and bwd_path != "portable":
                print("note: TK_SMEM_LIMIT configures the portable backward only; set TK_ATTENTION_BWD=portable "
                      "to time the configurations it selects", flush=True)
        except Exception as e:
            print(f"tk kernels unavailable, shown as n/a: {short_error(e)}", flush=True)

    results = []
    seed = int.from_bytes(os.urandom(4), "little")
    for shape in args.shapes:
        for causal in causals:
            t0 = time.time()
            r = run_rounds(shape, causal, dtype, impls, seed, args.graphs, args.rounds)
            results.append({"shape": list(shape), "causal": causal, "dtype": args.dtype,
                            "flops_fwd": flops(*shape, causal, "fwd"), **r})
            tk_f, tk_b = r["fwd"].get("tk", {}), r["bwd"].get("tk", {})
            fl_f, fl_b = r["fwd"].get("flash", {}), r["bwd"].get("flash", {})
            print(f"{shape} causal={causal}: tk fwd {fmt_tflops(tk_f).strip()} bwd {fmt_tflops(tk_b).strip()}"
                  f" | flash fwd {fmt_tflops(fl_f).strip()} bwd {fmt_tflops(fl_b).strip()} TFLOP/s"
                  f" ({time.time() - t0:.1f}s)", flush=True)
    print()
    print_table(results, impls)
    print()
    print("markdown (for bench/RESULTS.md):")
    print(markdown_table(results, impls, env))

    wrong = [r for r in results if r.get("check") and not r["check"]["ok"]]
    if wrong:
        print(f"WARNING: {len(wrong)} case(s) where tk disagrees with SDPA (relative error > {CHECK_TOL}):")
        for r in wrong:
            print(f"  {tuple(r['shape'])} causal={r['causal']}: {r['check']}")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"env": env, "seed": seed, "flop_counting": "fwd 4*B*H*T^2*D (x0.5 causal), bwd 2.5x fwd",
                       "results": results}, f, indent=1)
        print(f"wrote {args.json}")
    if args.png:
        try:
            write_png(results, impls, args.png)
            print(f"wrote {args.png}")
        except Exception as e:  # a missing matplotlib must not lose the numbers above
            print(f"could not write {args.png}: {short_error(e)}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
