"""Global loads that the compiler issued one at a time: in each kernel of a SASS dump (cuobjdump -sass), the
LDGs issued alone (the warp reads the result before it issues another global load, so it waits for that load's
whole round trip by itself), next to the kernel's total. Session 20 found the MLP GELU epilogue's 32 bias loads per tile
this way (each in its own branch, used at once), worth 6% of that GEMM.

    cuobjdump -sass gemm.cuda.o > gemm.sass && python dev/sass_load_chains.py gemm.sass [--min 8] [--arch sm_90a]

A heuristic over the listing's order: loads that feed each other's addresses must be serial, branches are not
followed, and loads inside a loop count once per loop body. Read the listed kernels' SASS before changing anything.
"""
import re
import sys

INSTR = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)\s*(.*?);")
REG = re.compile(r"\bR(\d+)\b")
STORES = ("ST", "RED", "ATOM")


def dest_regs(op: str, operands: str) -> set[int]:
    first = operands.split(",")[0]
    m = REG.search(first)
    if not m:
        return set()
    width = 4 if ".128" in op else 2 if ".64" in op else 1
    return {int(m.group(1)) + k for k in range(width)}


def source_regs(op: str, operands: str) -> set[int]:
    parts = operands.split(",")
    srcs = parts if op.startswith(STORES) else parts[1:]
    return {int(r) for p in srcs for r in REG.findall(p)}


def kernels(text: str):
    name, body = None, []
    for line in text.splitlines():
        if "Function :" in line:
            if name:
                yield name, body
            name, body = line.split("Function :")[1].strip(), []
        elif name:
            m = INSTR.search(line)
            if m:
                body.append((m.group(3), m.group(4)))
    if name:
        yield name, body


def chains(body) -> tuple[int, int]:
    """(global loads, loads alone in their batch): a batch is the run of LDGs issued before the first use of any
    of them; a batch of one is a load whose whole latency the warp waits for on its own."""
    loads = alone = 0
    batch: list[set[int]] = []  # destination registers of the loads in flight, not yet used
    for op, operands in body:
        if op.startswith("LDG"):
            loads += 1
            batch.append(dest_regs(op, operands))
            continue
        if batch and any(d & source_regs(op, operands) for d in batch):
            alone += len(batch) == 1
            batch = []
    return loads, alone


def main():
    path = sys.argv[1]
    least = int(sys.argv[sys.argv.index("--min") + 1]) if "--min" in sys.argv else 8
    text = open(path).read()
    if "--arch" in sys.argv:  # keep one architecture's section of the dump
        arch = sys.argv[sys.argv.index("--arch") + 1].replace("sm_", "")
        parts = re.split(r"(?=\n\s*Fatbin elf code:)", text)
        text = "\n".join(p for p in parts if f"arch = sm_{arch}" in p)
    rows = [(c, n, name) for name, body in kernels(text) for n, c in [chains(body)] if c >= least]
    for c, n, name in sorted(rows, reverse=True):
        print(f"{c:5d} of {n:5d} global loads alone  {name[:150]}")
    if not rows:
        print(f"no kernel with >= {least} global loads alone")


if __name__ == "__main__":
    main()
