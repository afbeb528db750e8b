"""
The table of bench/gpu_session.sh's train_seeds step: per run (kernels x seed) the best val loss and
wall time, then the eval curves (step: val loss) side by side and the mean best val loss per kernels.

    python bench/train_seeds_table.py DIR    # DIR holds <kernels>_<seed>.log and .rc (exit status, wall s)
"""

from __future__ import annotations

import os
import re
import sys

RUNS = [(k, s) for k in ("tk", "torch") for s in (1337, 1, 2)]
EVAL = re.compile(r"^step (\d+): train loss [\d.]+, val loss ([\d.]+)", re.M)


def read_run(d: str, k: str, s: int) -> tuple[dict[int, float], str, str, str]:
    log, rc_path = os.path.join(d, f"{k}_{s}.log"), os.path.join(d, f"{k}_{s}.rc")
    text = open(log).read() if os.path.isfile(log) else ""
    rc, wall = open(rc_path).read().split() if os.path.isfile(rc_path) else ("?", "?")
    best = re.findall(r"best val loss ([\d.]+)", text)
    return {int(a): float(b) for a, b in EVAL.findall(text)}, best[-1] if best else "n/a", wall, rc


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not os.path.isdir(argv[0]):
        print("usage: python bench/train_seeds_table.py DIR")
        return 2
    runs = {(k, s): read_run(argv[0], k, s) for k, s in RUNS}
    print(f"{'kernels':<8} {'seed':>5} {'best val':>9} {'wall s':>7} {'rc':>3}")
    for (k, s), (_, best, wall, rc) in runs.items():
        print(f"{k:<8} {s:>5} {best:>9} {wall:>7} {rc:>3}")
    steps = sorted(set().union(*[c.keys() for c, *_ in runs.values()]))
    print("eval curve, val loss per step:")
    print(f"{'step':>6} " + " ".join(f"{k + '/' + str(s):>11}" for k, s in RUNS))
    for st in steps:
        print(f"{st:>6} " + " ".join(f"{runs[r][0].get(st, float('nan')):>11.4f}" for r in RUNS))
    for k in ("tk", "torch"):
        vals = [float(b) for (kk, _), (_, b, _, _) in runs.items() if kk == k and b != "n/a"]
        if vals:
            print(f"{k}: best val mean {sum(vals) / len(vals):.4f} over {len(vals)} seeds "
                  f"(min {min(vals):.4f}, max {max(vals):.4f})")
    return 0 if all(b != "n/a" for _, b, _, _ in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
