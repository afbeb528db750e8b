"""Each call of the kernels whose name contains a pattern, in a Chrome trace written by `bench/bench_train.py
--profile --trace DIR`: its duration, the kernel before it and the gap to it, in timeline order, then the mean per
previous kernel. Session 44: is our attention forward slow in every layer of GPT-2 medium's step, or in some?

    python dev/trace_kernel_calls.py DIR/gpt2-medium_tk_graphs.json attention_fwd_hopper [--list]
"""
import argparse
import collections
import json


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("trace")
    p.add_argument("pattern")
    p.add_argument("--list", action="store_true", help="print every call")
    args = p.parse_args()
    with open(args.trace) as f:
        events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel" and "dur" in e]
    kernels.sort(key=lambda e: float(e["ts"]))
    by_prev = collections.defaultdict(list)
    durs = []
    for i, e in enumerate(kernels):
        if args.pattern not in e["name"]:
            continue
        prev = kernels[i - 1] if i else None
        d = float(e["dur"])
        durs.append(d)
        pname = prev["name"][:90] if prev else "-"
        by_prev[pname].append(d)
        if args.list:
            gap = float(e["ts"]) - float(prev["ts"]) - float(prev["dur"]) if prev else 0.0
            print(f"{len(durs):4d} {d:8.1f} us  gap {gap:6.1f}  after {pname}")
    if not durs:
        print("no kernel matches", args.pattern)
        return
    print(f"{len(durs)} calls: mean {sum(durs) / len(durs):.1f} us, min {min(durs):.1f}, max {max(durs):.1f}")
    for pname, ds in sorted(by_prev.items(), key=lambda kv: -len(kv[1])):
        print(f"  {len(ds):4d}x mean {sum(ds) / len(ds):7.1f} us after {pname}")


if __name__ == "__main__":
    main()
