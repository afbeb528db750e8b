"""The MLP GEMM's epilogues at GPT-2 124M's shape, alone: why the GELU / GELU' GEMMs take ~0.19 ms where the plain
store of the same product takes ~0.10 (session 18's train-step profile). Times each (do_bench medians), then runs
each once more, in a fixed order, for Nsight Compute:

    python dev/mlp_epilogue_ncu.py                      # timings
    ncu --clock-control none -k regex:gemm_kernel --launch-skip 8 -c 4 --section ... python dev/mlp_epilogue_ncu.py --ncu
    compute-sanitizer --tool racecheck python dev/mlp_epilogue_ncu.py --ncu --small   # N = 2000
    --sums: the GELU' GEMM also writes its column sums (the MLP's bias gradient), as training does
    --a-sums: two more cases after the four (dgelu and store dy W_proj summing dy's columns, a_colsum: the MLP's
              db_proj and the linear op's db) and the column-sum launches before and after that change (session 49)
    --C 1024: the model width (default 768, GPT-2 124M; 1024 is GPT-2 medium)
    --reverse: time the four cases in reverse order (the launches Nsight Compute sees keep theirs)
    --save FILE: after the runs, save every output (random bias, N = 2000 with --small) to FILE, to compare two
                 trees' kernels bitwise (dev/compare_saved.py)

Launch order after the timings' warm-up (8 launches: two of each): gelu, store (the same x W_fc^T), dgelu, store
(the same dy W_proj), i.e. ncu's --launch-skip 8 -c 4 profiles one of each.
"""
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from tk_kernels.families.mlp import ops  # noqa: E402

N = 2000 if "--small" in sys.argv else 16384  # 2000: 192 tiles (some CTAs take two), ragged
C = int(sys.argv[sys.argv.index("--C") + 1]) if "--C" in sys.argv else 768  # --C 1024: GPT-2 medium's MLP
H = 4 * C
dt = torch.bfloat16
g = torch.Generator(device="cuda").manual_seed(0)
x = torch.randn(N, C, device="cuda", generator=g).to(dt)
wf = (torch.randn(H, C, device="cuda", generator=g) * 0.02).to(dt)
wp = (torch.randn(C, H, device="cuda", generator=g) * 0.02).to(dt)
dy = torch.randn(N, C, device="cuda", generator=g).to(dt)
bf = torch.randn(H, device="cuda", generator=g) if "--save" in sys.argv else torch.zeros(H, device="cuda")
aux, out, dh = (torch.empty(N, H, device="cuda", dtype=dt) for _ in range(3))  # aux: gelu'(pre) (session 22 on)
sums = torch.empty((N + 63) // 64, H, device="cuda") if "--sums" in sys.argv else None
a_sums = torch.empty((N + 63) // 64, C, device="cuda") if "--a-sums" in sys.argv else None
ext = ops._ext()

cases = {
    "gelu  x W_fc^T (+b, GELU, writes gelu')": lambda: ext.gemm_(x, False, wf, False, out, ops.GELU, bf, aux, False),
    "store x W_fc^T (+b)": lambda: ext.gemm_(x, False, wf, False, out, ops.STORE, bf),
    "dgelu dy W_proj (* gelu')": lambda: ext.gemm_(dy, False, wp, True, dh, ops.DGELU, None, aux, False, 0, sums),
    "store dy W_proj": lambda: ext.gemm_(dy, False, wp, True, dh, ops.STORE),
}
if a_sums is not None:
    cases.update({
        "dgelu dy W_proj (* gelu') + dy sums": lambda: ext.gemm_(dy, False, wp, True, dh, ops.DGELU, None, aux, False, 0,
                                                                sums, a_sums),
        "store dy W_proj + dy sums": lambda: ext.gemm_(dy, False, wp, True, dh, ops.STORE, a_colsum=a_sums),
        "column_sums(dy) (before)": lambda: ext.column_sums(dy, dt),
        "column_sums(dy's block sums)": lambda: ext.column_sums(a_sums, dt),
    })
for _ in range(2):  # warm-up: 8 launches
    for f in cases.values():
        f()
torch.cuda.synchronize()
if "--ncu" not in sys.argv:
    from triton.testing import do_bench
    timed = list(cases.items())[::-1] if "--reverse" in sys.argv else cases.items()  # the GPU's power state drifts
    for name, f in timed:
        ms = do_bench(f, warmup=50, rep=300)
        rate = "" if name.startswith("column_sums") else f"  {2 * N * H * C / ms / 1e9:6.1f} TFLOP/s"
        print(f"{name:40s} {ms * 1e3:7.1f} us{rate}", flush=True)
for f in cases.values():  # the profiled launches
    f()
torch.cuda.synchronize()
if "--save" in sys.argv:
    outs = {}
    for name, f in cases.items():  # each case once more, its outputs kept
        f()
        torch.cuda.synchronize()
        if name.startswith("column_sums"):
            continue
        outs[name] = (out if "W_fc" in name else dh).clone()
        if name.startswith("gelu"):
            outs[name + " aux"] = aux.clone()
        if sums is not None and name.startswith("dgelu"):
            outs[name + " sums"] = sums.clone()
        if name.endswith("+ dy sums"):
            outs[name + " a_colsum"] = a_sums.clone()
    torch.save({k: v.cpu() for k, v in outs.items()}, sys.argv[sys.argv.index("--save") + 1])
