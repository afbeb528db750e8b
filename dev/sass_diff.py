"""Compare the SASS of two builds of the tk_kernels extensions, kernel by kernel.

    python dev/sass_diff.py dump LIB [LIB ...] -o before.json   # .so / .cubin / fatbin files
    python dev/sass_diff.py compare before.json after.json      # or .so files directly
    python dev/sass_diff.py stats before.cubin after.cubin     # per kernel: registers, stack, instruction
                                                                # and HGMMA / UTMALDG / LDL / STL counts

Normalisation: addresses and instruction encodings are dropped, symbol names are demangled, and the
anonymous / tk_attn namespaces are removed from them (so moving a kernel between files or namespaces
does not count as a change). Kernels are matched by normalised name; a kernel whose name changed is
matched by its instruction stream and reported as "renamed". Exit status 1 if any kernel differs or
has no counterpart. cuobjdump is taken from $CUOBJDUMP, else the CUDA toolkit, else triton's copy.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tk_kernels.build import find_cuobjdump  # noqa: E402


def cuobjdump() -> str:
    tool = find_cuobjdump()
    if tool is None:
        sys.exit("sass_diff: no cuobjdump found (set CUOBJDUMP)")
    return tool


def demangle(names: list[str]) -> dict[str, str]:
    if not names:
        return {}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
    return dict(zip(names, out.splitlines()))


def normalise_name(name: str) -> str:
    name = name.replace("(anonymous namespace)::", "").replace("tk_attn::", "")
    return re.sub(r"\s+", " ", name).strip()


_FUNC = re.compile(r"^\s*Function : (\S+)")
_ARCH = re.compile(r"^\s*code for (sm_\w+)")
_INSTR = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;?\s*(/\* 0x[0-9a-f]+ \*/)?\s*$")
_SYM = re.compile(r"`\(([^)]*)\)")


def parse(lib: Path) -> dict[str, list[str]]:
    """{ "sm_90a :: kernel name": [instruction, ...] } for every function in lib."""
    text = subprocess.run([cuobjdump(), "--dump-sass", str(lib)], capture_output=True, text=True, check=True).stdout
    raw: list[tuple[str, str, list[str]]] = []
    arch, cur = "?", None
    for line in text.splitlines():
        m = _ARCH.match(line)
        if m:
            arch = m.group(1)
            continue
        m = _FUNC.match(line)
        if m:
            cur = (arch, m.group(1), [])
            raw.append(cur)
            continue
        if cur is None:
            continue
        m = _INSTR.match(line)
        if m and m.group(1):
            cur[2].append(m.group(1).rstrip(" ;"))
    mangled = sorted({f for _, f, _ in raw} | {s for _, _, ins in raw for i in ins for s in _SYM.findall(i)})
    dm = demangle(mangled)
    funcs: dict[str, list[str]] = {}
    for arch, f, ins in raw:
        ins = [_SYM.sub(lambda m: "`(" + normalise_name(dm.get(m.group(1), m.group(1))) + ")", i) for i in ins]
        key = f"{arch} :: {normalise_name(dm.get(f, f))}"
        if key in funcs and funcs[key] != ins:  # same name in two translation units with different code
            n = 2
            while f"{key} #{n}" in funcs:
                n += 1
            key = f"{key} #{n}"
        funcs[key] = ins
    return funcs


def load(paths: list[str]) -> dict[str, list[str]]:
    if len(paths) == 1 and paths[0].endswith(".json"):
        return json.loads(Path(paths[0]).read_text())
    funcs: dict[str, list[str]] = {}
    for p in paths:
        funcs.update(parse(Path(p)))
    return funcs


def compare(a: dict[str, list[str]], b: dict[str, list[str]]) -> int:
    bad = 0
    only_a = [k for k in a if k not in b]
    only_b = [k for k in b if k not in a]
    for k in sorted(set(a) & set(b)):
        if a[k] == b[k]:
            print(f"identical  {len(a[k]):6d} instr  {k}")
        else:
            diff = sum(x != y for x, y in zip(a[k], b[k])) + abs(len(a[k]) - len(b[k]))
            print(f"DIFFERENT  {len(a[k]):6d} -> {len(b[k])} instr ({diff} lines differ)  {k}")
            bad += 1
    by_code_b = {}
    for k in only_b:
        by_code_b.setdefault(json.dumps(b[k]), []).append(k)
    matched_b = set()
    for k in sorted(only_a):
        arch = k.split(" :: ")[0]
        hits = [x for x in by_code_b.get(json.dumps(a[k]), []) if x.startswith(arch) and x not in matched_b]
        if hits:
            matched_b.add(hits[0])
            print(f"identical  {len(a[k]):6d} instr  {k}  (renamed: {hits[0].split(' :: ', 1)[1]})")
        else:
            print(f"MISSING in second: {k}")
            bad += 1
    for k in sorted(set(only_b) - matched_b):
        print(f"NEW in second:     {k}")
        bad += 1
    print(f"{len(a)} functions in first, {len(b)} in second, {bad} differ or unmatched")
    return 1 if bad else 0


def resources(lib: Path) -> dict[str, dict[str, int]]:
    """{ "kernel name": {"REG": .., "STACK": .., "LOCAL": ..} } from cuobjdump --dump-resource-usage."""
    text = subprocess.run([cuobjdump(), "--dump-resource-usage", str(lib)], capture_output=True, text=True,
                          check=True).stdout
    out, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"^\s*Function (\S+):", line)
        if m:
            cur = m.group(1)
            continue
        if cur and "REG:" in line:
            out[cur] = {k: int(v) for k, v in re.findall(r"(REG|STACK|LOCAL):(\d+)", line)}
            cur = None
    dm = demangle(list(out))
    return {normalise_name(dm.get(k, k)): v for k, v in out.items()}


STAT_OPS = ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "BAR", "LDL", "STL", "CALL")


def stats(first: str, second: str) -> int:
    """Side-by-side counts per kernel (matched by normalised name) and the size of the normalised diff."""
    a, b = load([first]), load([second])
    ra = resources(Path(first)) if not first.endswith(".json") else {}
    rb = resources(Path(second)) if not second.endswith(".json") else {}
    def count(ins, op):
        return sum(1 for i in ins if re.match(r"^(@!?U?P\w+\s+)?" + op + r"\b", i))
    for k in sorted(set(a) & set(b)):
        name = k.split(" :: ", 1)[1]
        r1, r2 = ra.get(name, {}), rb.get(name, {})
        diff = sum(x != y for x, y in zip(a[k], b[k])) + abs(len(a[k]) - len(b[k]))
        ops = "  ".join(f"{op} {count(a[k], op)}/{count(b[k], op)}" for op in STAT_OPS)
        print(f"{name}\n  REG {r1.get('REG', '?')}/{r2.get('REG', '?')}  STACK {r1.get('STACK', '?')}/"
              f"{r2.get('STACK', '?')}  instr {len(a[k])}/{len(b[k])} ({100.0 * (len(b[k]) - len(a[k])) / len(a[k]):+.2f}%)"
              f"  {ops}  diff lines {diff}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump")
    d.add_argument("libs", nargs="+")
    d.add_argument("-o", "--output", required=True)
    c = sub.add_parser("compare")
    c.add_argument("first")
    c.add_argument("second")
    t = sub.add_parser("stats")
    t.add_argument("first")
    t.add_argument("second")
    args = ap.parse_args(argv)
    if args.cmd == "dump":
        funcs = load(args.libs)
        Path(args.output).write_text(json.dumps(funcs, indent=0, sort_keys=True))
        print(f"{len(funcs)} functions -> {args.output}")
        return 0
    if args.cmd == "stats":
        return stats(args.first, args.second)
    return compare(load([args.first]), load([args.second]))


if __name__ == "__main__":
    sys.exit(main())
