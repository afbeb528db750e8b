"""Where the GPU sits idle between kernels: read a Chrome trace written by `bench/bench_train.py --profile --trace
DIR` and list the gaps between consecutive kernels on the GPU timeline (the idle time between one kernel's end and
the next one's start), summed per pair of kernel families (ours vs PyTorch's), with the largest single pairs.

    python dev/trace_gaps.py DIR/gpt2_tk_graphs.json [--big 20]

Gaps longer than --big microseconds are counted apart (host-side waits: the step boundaries, a sync); the rest is
what launching one kernel after another costs inside the step's graphs, the time programmatic dependent launch
could hide where both kernels of a pair are ours.
"""
import argparse
import collections
import json
import re


OURS = ("gemm_kernel", "forward_kernel", "backward_kernel", "reduce_kernel", "attention_fwd_hopper_kernel",
        "attention_bwd_hopper_kernel", "hbwd_prep_kernel", "bwd_dq_convert_kernel", "bwd_delta_kernel",
        "colsum_partial_kernel", "colsum_finish_kernel", "softmax_xent_kernel", "mul_scalar_kernel", "adamw_kernel",
        "grad_sq_sum_kernel", "dropout_mask_kernel", "attention_fwd_kernel", "bwd_dkdv_kernel", "bwd_dq_kernel")


def family(name: str) -> str:
    """tk (ours), triton (Inductor), cublas, or aten (PyTorch's other kernels)."""
    if "at::native" not in name and any(re.search(rf"\b{k}\b", name) for k in OURS):
        return "tk"
    if name.startswith("triton"):
        return "triton"
    n = name.lower()
    if "cutlass" in n or "gemm" in n or "xmma" in n or "nvjet" in n or "cublas" in n:
        return "cublas"
    return "aten"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("--big", type=float, default=20.0, help="gaps above this many us are host waits (default 20)")
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and "dur" in e]
    kernels.sort(key=lambda e: float(e["ts"]))
    print(f"{len(kernels)} kernels, {sum(float(e['dur']) for e in kernels) / 1000:.3f} ms of kernel time")
    small = big = 0.0
    n_small = n_big = 0
    by_pair = collections.defaultdict(lambda: [0.0, 0])
    by_names = collections.defaultdict(lambda: [0.0, 0])
    for a, b in zip(kernels, kernels[1:]):
        gap = float(b["ts"]) - (float(a["ts"]) + float(a["dur"]))
        if gap > args.big:
            big += gap
            n_big += 1
            continue
        gap = max(gap, 0.0)
        small += gap
        n_small += 1
        fa, fb = family(a["name"]), family(b["name"])
        by_pair[(fa, fb)][0] += gap
        by_pair[(fa, fb)][1] += 1
        key = (a["name"][:60], b["name"][:60])
        by_names[key][0] += gap
        by_names[key][1] += 1
    span = float(kernels[-1]["ts"]) + float(kernels[-1]["dur"]) - float(kernels[0]["ts"])
    print(f"span {span / 1000:.3f} ms; gaps <= {args.big:g} us: {n_small} summing {small / 1000:.3f} ms "
          f"(mean {small / max(n_small, 1):.2f} us); larger gaps: {n_big} summing {big / 1000:.3f} ms")
    print("by family pair (previous -> next): ms total, count, mean us")
    for (fa, fb), (t, c) in sorted(by_pair.items(), key=lambda kv: -kv[1][0]):
        print(f"  {fa:>7} -> {fb:<7} {t / 1000:7.3f} {c:6d} {t / c:6.2f}")
    print(f"largest pairs by total gap (top {args.top}):")
    for (na, nb), (t, c) in sorted(by_names.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"  {t / 1000:7.3f} ms {c:5d}x {t / c:5.2f} us  {na}  ->  {nb}")


if __name__ == "__main__":
    main()
