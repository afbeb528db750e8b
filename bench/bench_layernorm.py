"""
Residual add + LayerNorm, forward + backward, side by side in one process: our kernels
(tk_kernels.add_layer_norm) vs eager PyTorch vs torch.compile of the same PyTorch code.

    python bench/bench_layernorm.py                                  # the default shapes
    python bench/bench_layernorm.py --shapes 16384,768 16384,2048    # rows,width
    python bench/bench_layernorm.py --json out.json --png out.png    # also save results + a plot
    python bench/bench_layernorm.py --graphs    # each fwd+bwd as a CUDA-graph replay: GPU time only

The op is what autocast training runs per block: x (fp32 residual stream) + delta (bf16 sublayer
output) -> s (fp32) and y = LayerNorm(s) in bf16 (the next GEMM's input); the backward takes dy (bf16)
and ds (fp32, the residual's incoming gradient) and gives dx (fp32), ddelta (bf16), dweight, dbias.
The PyTorch version is `s = x + delta; y = F.layer_norm(s, ...).to(bf16)`; ours is what the eager model
calls, dispatch.add_layer_norm under a kernels=tk plan (the extension's add_layer_norm, autograd in C++).

Times: triton.testing.do_bench medians (it flushes the L2 cache between runs), else a CUDA-event loop.
Bandwidth: the bytes the op must move at least, over the median time:
    fwd  N C (sx + sd + sx + sy)                 read x, delta; write s, y
    bwd  N C (sy + sx + sx + sx + sd)            read dy, ds, s; write dx, ddelta
    + 16 N (mean, rstd written and read) + weight/bias (negligible)
with sx = 4 (fp32), sd = sy = 2 (bf16): 28 B per element. The ratio column is ours over the faster
of eager and compile (> 1: ours is faster).
"""

import argparse
import json
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root: tk_kernels

DEFAULT_SHAPES = [(16384, 768), (16384, 1024), (16384, 1600), (16384, 2048)]
X_DT, D_DT = torch.float32, torch.bfloat16


def bench_ms(fn, grad_to_none) -> float:
    """Median milliseconds of fn()."""
    try:
        from triton.testing import do_bench
    except ImportError:
        do_bench = None
    if do_bench is not None:
        return float(do_bench(fn, warmup=25, rep=100, grad_to_none=grad_to_none, quantiles=[0.5, 0.2, 0.8])[0])
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(100)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(100)]
    for s, e in zip(starts, ends):
        for t in grad_to_none:
            t.grad = None
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return float(torch.tensor([s.elapsed_time(e) for s, e in zip(starts, ends)]).median())


def bytes_moved(N: int, C: int) -> int:
    sx, sd, sy = 4, 2, 2
    return N * C * ((sx + sd + sx + sy) + (sy + sx + sx + sx + sd)) + 16 * N


def torch_add_ln(x, d, w, b):
    s = x + d
    return s, F.layer_norm(s, (x.shape[-1],), w, b, 1e-5).to(D_DT)


def graphed(step, capture_error_mode: str = "global"):
    """step (here fwd + bwd; bench_attention*.py's calls too) captured once as a CUDA graph after warm-up
    calls on a side stream: its replay costs the GPU time only, with no host overhead between the kernels
    (what a training step with a deep launch queue sees). capture_error_mode: torch.cuda.graph's
    (dev/capture_first_bwd.py tries "relaxed")."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, capture_error_mode=capture_error_mode):
        step()
    return graph.replay


def fwd_bwd_ms(f, x, d, w, b, dy, ds, graphs: bool, what: str) -> float | None:
    """Median ms of one forward + backward of s, y = f(x, d, w, b) with incoming gradients ds, dy (graphs: as
    CUDA-graph replays); None, with a note naming `what`, if it fails (the other implementations go on)."""
    def step():
        s, y = f(x, d, w, b)
        if graphs:  # gradients as outputs (no .grad accumulation inside the graph)
            return torch.autograd.grad([s, y], [x, d, w, b], [ds, dy])
        torch.autograd.backward([s, y], [ds, dy])
    try:
        step()  # compile / build outside the timing
        torch.cuda.synchronize()
        return bench_ms(graphed(step) if graphs else step, [] if graphs else [x, d, w, b])
    except Exception as e:
        print(f"  {what} failed: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
        return None


def run_shape(N, C, impls, graphs=False):
    from tk_kernels import dispatch
    from tk_kernels.families.layernorm import ops
    with dispatch.override("attention", tk=None), dispatch.override("mlp", tk=None), \
            dispatch.override("classifier", tk=None), dispatch.override("layer_norm", not_used=None):
        plan = dispatch.plan("tk", "cuda", D_DT, 64, n_embd=C)  # the model's plan under bf16 autocast
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(N, C, device="cuda", generator=g).requires_grad_()
    d = torch.randn(N, C, device="cuda", generator=g).to(D_DT).requires_grad_()
    w = (1 + 0.1 * torch.randn(C, device="cuda", generator=g)).requires_grad_()
    b = (0.1 * torch.randn(C, device="cuda", generator=g)).requires_grad_()
    dy = torch.randn(N, C, device="cuda", generator=g).to(D_DT)
    ds = torch.randn(N, C, device="cuda", generator=g)
    fns = {"tk": lambda x, d, w, b: dispatch.add_layer_norm(plan, x, d, w, b),  # what the eager model calls
           "tk_ops": lambda x, d, w, b: ops._custom_op_path(x, d, w, b, 1e-5, D_DT),
           "eager": torch_add_ln, "compile": torch.compile(torch_add_ln)}
    row = {"N": N, "C": C, "bytes": bytes_moved(N, C)}
    for name in impls:
        row[name] = fwd_bwd_ms(fns[name], x, d, w, b, dy, ds, graphs, f"{name} at ({N}, {C})")
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=None, help="rows,width pairs (default: %s)" %
                    " ".join(f"{n},{c}" for n, c in DEFAULT_SHAPES))
    ap.add_argument("--impls", default="tk,eager,compile", help="comma-separated subset of tk,tk_ops,eager,compile "
                    "(tk: dispatch.add_layer_norm as the eager model calls it, autograd in C++; tk_ops: the custom "
                    "ops with their Python autograd, called eagerly: what torch.compile traces)")
    ap.add_argument("--graphs", action="store_true", help="time each fwd+bwd as a CUDA-graph replay: GPU time "
                    "only, no host overhead (for every implementation alike)")
    ap.add_argument("--json", help="write the results to this JSON file")
    ap.add_argument("--png", help="write a bar plot to this PNG file (needs matplotlib)")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_layernorm: needs a CUDA GPU", file=sys.stderr)
        return 1
    try:
        shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes] if args.shapes else DEFAULT_SHAPES
        assert all(len(s) == 2 for s in shapes)
    except (ValueError, AssertionError):
        ap.error("--shapes takes rows,width pairs such as 16384,768")
    impls = [i for i in args.impls.split(",") if i]
    print(f"device={torch.cuda.get_device_name()} torch={torch.__version__} x={X_DT} delta/y={D_DT} "
          f"bytes = N*C*28 + 16*N (see the docstring); timing: "
          f"{'CUDA-graph replays (GPU time only)' if args.graphs else 'eager calls (host overhead included)'}",
          flush=True)
    results = []
    t0 = time.time()
    hdr = f"{'N':>6} {'C':>5} " + " ".join(f"{i + ' ms':>11} {'TB/s':>6}" for i in impls) + "  tk vs best torch"
    print(hdr)
    for N, C in shapes:
        r = run_shape(N, C, impls, args.graphs)
        results.append(r)
        cells = []
        for i in impls:
            ms = r[i]
            cells.append(f"{ms:11.4f} {r['bytes'] / (ms * 1e-3) / 1e12:6.2f}" if ms else f"{'n/a':>11} {'':>6}")
        best = min([r[i] for i in ("eager", "compile") if r.get(i)] or [float("nan")])
        ratio = best / r["tk"] if r.get("tk") else float("nan")
        r["ratio_vs_best_torch"] = ratio
        print(f"{N:>6} {C:>5} " + " ".join(cells) + f"  {ratio:.2f}x", flush=True)
    print(f"({time.time() - t0:.1f}s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "graphs": args.graphs,
                       "bytes_formula": "N*C*28 + 16*N", "results": results}, f, indent=1)
    if args.png:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("no matplotlib: no plot", file=sys.stderr)
        else:
            fig, ax = plt.subplots(figsize=(8, 4))
            width = 0.8 / len(impls)
            for k, i in enumerate(impls):
                ax.bar([j + k * width for j in range(len(results))],
                       [r["bytes"] / (r[i] * 1e-3) / 1e12 if r[i] else 0 for r in results], width, label=i)
            ax.set_xticks([j + width * (len(impls) - 1) / 2 for j in range(len(results))],
                          [f"({r['N']}, {r['C']})" for r in results])
            ax.set_ylabel("TB/s (fwd+bwd, over the bytes the op must move)")
            ax.set_title("residual add + LayerNorm, fwd + bwd")
            ax.legend()
            fig.tight_layout()
            fig.savefig(args.png, dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
