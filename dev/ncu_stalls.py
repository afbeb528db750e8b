"""Per-instruction warp stall samples from Nsight Compute's source page (SourceCounters section), as a table.

    ncu -k regex:KERNEL -c 1 --section SourceCounters --section WarpStateStats -o rep python ...
    ncu -i rep.ncu-rep --page source --csv --print-source sass > rep.csv
    python dev/ncu_stalls.py rep.csv [--top 40] [--near 0x2710]

Prints the kernel's stall reasons over all samples, then the instructions with the most samples: offset from the
kernel's first instruction (comparable with cuobjdump --dump-sass of the same build), share of samples, times
executed, the two largest reasons and the instruction. --near OFFSET also lists the instructions around OFFSET.
Session 21 found with it that 36% of the samples of a GELU GEMM variant were its consumers waiting on a ring
slot's full barrier (TMA data not yet landed).
"""
import argparse
import csv

ap = argparse.ArgumentParser()
ap.add_argument("csv")
ap.add_argument("--top", type=int, default=40)
ap.add_argument("--near", action="append", default=[])
args = ap.parse_args()
lines = open(args.csv).read().split("\n")
start = next(i for i, line in enumerate(lines) if line.startswith('"Address"'))
print(lines[0][:200])
rows = list(csv.DictReader(lines[start:]))
key = "Warp Stall Sampling (All Samples)"
reasons = [k for k in rows[0] if k.startswith("stall_") and "(Not" not in k]
base = min(int(r["Address"], 16) for r in rows)
total = sum(float(r[key] or 0) for r in rows) or 1.0
print(f"{len(rows)} instructions, {total:.0f} samples; by reason:")
agg = {k: sum(float(r[k] or 0) for r in rows) for k in reasons}
print("  " + ", ".join(f"{k[6:]} {v / total:.1%}" for k, v in sorted(agg.items(), key=lambda x: -x[1])[:10]))


def line(r):
    top = sorted(((float(r[k] or 0), k[6:]) for k in reasons), reverse=True)[:2]
    return (f"{int(r['Address'], 16) - base:#07x} {float(r[key] or 0) / total:6.1%} x{r['Instructions Executed']:>7s} "
            f"{top[0][1]}:{top[0][0]:.0f} {top[1][1]}:{top[1][0]:.0f}  {r['Source'][:70]}")


for r in sorted(rows, key=lambda r: -float(r[key] or 0))[: args.top]:
    print(line(r))
for near in args.near:
    at = int(near, 16)
    print(f"-- around {near}")
    for r in rows:
        if abs(int(r["Address"], 16) - base - at) <= 0x80:
            print(line(r))
