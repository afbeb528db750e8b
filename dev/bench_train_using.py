"""
bench/bench_train.py with kernel families switched on that the model does not use yet (their registry
entry's not_used cleared), to time a family's effect on the whole train step before turning it on:

    python dev/bench_train_using.py mlp -- --models gpt2 --kernels tk --compile compile
"""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from tk_kernels import dispatch  # noqa: E402

if __name__ == "__main__":
    argv = sys.argv[1:]
    split = argv.index("--") if "--" in argv else len(argv)
    families, rest = argv[:split], argv[split + 1:]
    for f in families:
        if f not in dispatch.FAMILIES:
            sys.exit(f"unknown family {f!r}; families: {', '.join(dispatch.FAMILIES)}")
        dispatch.FAMILIES[f] = dispatch.dataclasses.replace(dispatch.FAMILIES[f], not_used=None)
        print(f"bench_train_using: {f} on")
    import bench_train
    sys.exit(bench_train.main(rest))
