"""
Where the MLP GEMM's GELU epilogues lose their time: diagnostic variants of tk_kernels/families/mlp/csrc
(text substitutions, each built into its own extension, built in parallel subprocesses), timed side by side at
the fc layer's shape of GPT-2 124M (16384 x 3072 x 768) beside cuBLAS.

    python dev/mlp_gemm_variants.py [--variants shipped,store3,...] [--M 16384 --N 3072 --K 768]

Session 13's train step (bench/RESULTS.md) has the GELU GEMM at 0.183 ms and GELU' at 0.197 against 0.103-0.105
for our plain store at the (16384 x 768 x 3072) shapes; session 4 had the plain store at 0.120 ms at this shape.
The variants isolate what the GELU epilogue adds (a variant's outputs are only meaningful for its question):
  store3        the plain store with the 3-stage ring the GELU epilogues have (4 stages shipped): is it the ring?
  gelu_identity GELU's epilogue without its math (g = pre): is it the erf / exp arithmetic?
  gelu_nopre    GELU's epilogue without the pre-activation's TMA stores: is it the second output?
  dgelu_identity GELU' without its math (dh = dy W_proj, the pre-activation still read)
  gelu_identity_nostage  gelu_identity without finish()'s staging stores (timing only): the serial part?
  gelu_regs     GELU's epilogue from registers like the plain store's (see GELU_REGS below): the candidate fix
Every variant's GELU outputs (g and the pre-activation, erf and tanh, ragged shapes) are compared bitwise with the
shipped kernel's; only the diagnostic ones (identity, nostage, nopre) may differ.
Not shipped.
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tk_kernels import build as tkbuild  # noqa: E402
from tk_kernels.families.mlp import ops  # noqa: E402
from dev.variant_pkg import variant_pkg  # noqa: E402

# gelu_regs: GELU's epilogue from registers as the plain store's (finish() only rounds the tile + bias into the 64
# pending registers, no staging in shared memory between tiles); each piece writes its 8 pending words to a
# pre-activation box and their GELU to an output box, then shifts the pending words down, so that one rolled copy
# of the piece's code (dev/hopper/mlp_gelu_regs_piece.cuh, inserted before the staged epilogues) serves all 8
# pieces. ptxas (CUDA 13): 4 bytes of spill, one store before and one load after the tile loop (GELU instances).
STAGED_ANCHOR = """// ------------------------------------------------------------------------------------------------
// staged epilogues (GELU, GELU')"""
GELU_REGS_PIECE = (ROOT / "dev" / "hopper" / "mlp_gelu_regs_piece.cuh").read_text().split("\n", 2)[2]
GELU_REGS = [
    ("gemm.cu",
     """constexpr bool staged(Epilogue E) { return E == Epilogue::gelu || E == Epilogue::dgelu; }
constexpr int ring_stages(Epilogue E) { return staged(E) ? 3 : 4; }
constexpr int epilogue_bytes(Epilogue E) { return 2 * (staged(E) ? TILE_BYTES + SUM_BYTES : 2 * BOX_BYTES); }""",
     """constexpr bool staged(Epilogue E) { return E == Epilogue::dgelu; }
constexpr int ring_stages(Epilogue E) { return E == Epilogue::gelu || E == Epilogue::dgelu ? 3 : 4; }
// GELU from registers: per consumer 2 boxes of the pre-activation and 2 of the GELU output (double-buffered)
constexpr int epilogue_bytes(Epilogue E) {
  return 2 * (staged(E) ? TILE_BYTES + SUM_BYTES : E == Epilogue::gelu ? 4 * BOX_BYTES : 2 * BOX_BYTES);
}"""),
    ("gemm.cu", STAGED_ANCHOR, GELU_REGS_PIECE + "\n" + STAGED_ANCHOR),
    ("gemm.cu",
     """    } else if constexpr (E == Epilogue::store) {
      round_into<T>(pend, acc, w, g.s, g.e);""",
     """    } else if constexpr (E == Epilogue::store || E == Epilogue::gelu) {
      round_into<T>(pend, acc, w, g.s, g.e);"""),
    ("gemm.cu",
     """    else if constexpr (staged(E)) epilogue_piece<T, E>(epi, piece, pw, id, g.s, g.e, g.c_map, pre);""",
     """    else if constexpr (E == Epilogue::gelu) {
      if (g.e.tanh_gelu) gelu_piece<T, true>(pend, piece, id, g.c_map, g.aux_map, epi, stores);
      else gelu_piece<T, false>(pend, piece, id, g.c_map, g.aux_map, epi, stores);
    } else if constexpr (staged(E)) epilogue_piece<T, E>(epi, piece, pw, id, g.s, g.e, g.c_map, pre);"""),
]

VARIANTS = {
    "shipped": [],
    "store3": [("gemm.cu", "constexpr int ring_stages(Epilogue E) { return staged(E) ? 3 : 4; }",
                "constexpr int ring_stages(Epilogue E) { return 3; }")],
    "gelu_identity": [("gemm.cu", "w[k] = to_word(V::pack(gelu(x.x, TANH), gelu(x.y, TANH)));",
                       "w[k] = to_word(V::pack(x.x, x.y));")],
    # gelu_identity without the tile's staging stores in finish() (the staged values are garbage; timing only)
    "gelu_identity_nostage": [("gemm.cu", "w[k] = to_word(V::pack(gelu(x.x, TANH), gelu(x.y, TANH)));",
                               "w[k] = to_word(V::pack(x.x, x.y));"),
                              ("gemm.cu", "      stage_tile<T, E>(epi, acc, w, g.s, g.e);",
                               "      if (g.s.M < 0) stage_tile<T, E>(epi, acc, w, g.s, g.e);")],
    "gelu_nopre": [("gemm.cu", "tk::tma::store_async(g.aux_map, epi + b * BOX_BYTES, w.n0 + b * BOX, w.m0 + id * 64);",
                    "(void)b;")],
    "gelu_regs": GELU_REGS,
    "dgelu_identity": [("gemm.cu", "w[k] = to_word(V::pack(x.x * gelu_grad(q.x, TANH), x.y * gelu_grad(q.y, TANH)));",
                        "w[k] = to_word(V::pack(x.x + 0.f * q.x, x.y + 0.f * q.y));")],
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--M", type=int, default=16384)
    ap.add_argument("--N", type=int, default=3072)
    ap.add_argument("--K", type=int, default=768)
    args = ap.parse_args()
    names = args.variants.split(",")
    from triton.testing import do_bench
    tmp = Path(tempfile.mkdtemp(prefix="mlp_variants_"))
    pkgs = {n: variant_pkg("mlp", n, VARIANTS[n], tmp) for n in names}
    # build in parallel subprocesses (each its own extension directory), then load the cached builds here
    env = dict(os.environ, MAX_JOBS=str(max(2, (os.cpu_count() or 4) // len(names))))
    procs = [subprocess.Popen([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(ROOT)!r}); "
                               f"from tk_kernels import build; build.build('mlp', pkg_dir={str(p)!r}, quiet=True)"],
                              env=env) for p in pkgs.values()]
    for n, pr in zip(pkgs, procs):
        if pr.wait() != 0:
            sys.exit(f"variant {n}: build failed")
    exts = {n: tkbuild.build("mlp", pkg_dir=p, quiet=True)[0] for n, p in pkgs.items()}

    M, N, K = args.M, args.N, args.K
    dt = torch.bfloat16
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(M, K, generator=g, device="cuda").to(dt)
    w = (torch.randn(N, K, generator=g, device="cuda") * K ** -0.5).to(dt)
    b = 0.1 * torch.randn(N, generator=g, device="cuda")
    dy = torch.randn(M, K, generator=g, device="cuda").to(dt)   # the GELU' GEMM: dy (M, K) W_proj (K, N)
    wp = (torch.randn(K, N, generator=g, device="cuda") * N ** -0.5).to(dt)
    pre = torch.randn(M, N, generator=g, device="cuda").to(dt)
    out, aux = torch.empty(M, N, device="cuda", dtype=dt), torch.empty(M, N, device="cuda", dtype=dt)
    sums = torch.empty((M + 63) // 64, N, device="cuda")
    bench = lambda fn: do_bench(fn, warmup=25, rep=200, return_mode="median")  # noqa: E731
    flops = 2 * M * N * K
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, bf16, M={M} N={N} K={K}; do_bench median ms "
          f"(TFLOP/s)")
    ref = {
        "cuBLAS x W^T + b (F.linear)": bench(lambda: F.linear(x, w, b.to(dt))),
        "cuBLAS F.linear + F.gelu": bench(lambda: F.gelu(F.linear(x, w, b.to(dt)))),
        "cuBLAS dy W_proj (mm)": bench(lambda: torch.mm(dy, wp)),
    }
    for k, ms in ref.items():
        print(f"  {k:34s} {ms:.4f} ({flops / ms / 1e9:.0f})")

    def gelu_outputs(ext, m, n, k, tanh):
        """(g, pre) of the GELU GEMM at (m, n, k) on NaN-filled outputs, fixed inputs"""
        gg = torch.Generator(device="cuda").manual_seed(m * 7 + n + k)
        xa = torch.randn(m, k, generator=gg, device="cuda").to(dt)
        wa = (torch.randn(n, k, generator=gg, device="cuda") * k ** -0.5).to(dt)
        ba = torch.randn(n, generator=gg, device="cuda")
        ga, pa = (torch.full((m, n), float("nan"), device="cuda", dtype=dt) for _ in range(2))
        ext.gemm_(xa, False, wa, False, ga, ops.GELU, ba, pa, tanh)
        torch.cuda.synchronize()
        return ga, pa

    # GELU outputs against the shipped kernel's, bitwise (same math on the same rounded values), ragged shapes included
    checks = [(1000, 3072, 768), (7, 520, 64), (300, 264, 1024), (M, N, K)]
    want = {(c, t): gelu_outputs(exts["shipped"], *c, t) for c in checks for t in (False, True)} if "shipped" in exts else {}
    for n, ext in exts.items():
        row = {}
        row["store+bias"] = bench(lambda: ext.gemm_(x, False, w, False, out, ops.STORE, b))
        same = all(torch.equal(a, b_) for key, ab in want.items() for a, b_ in zip(gelu_outputs(ext, *key[0], key[1]), ab)) \
            if want else None
        row["gelu+bias"] = bench(lambda: ext.gemm_(x, False, w, False, out, ops.GELU, b, aux, False))
        row["dgelu+colsum"] = bench(lambda: ext.gemm_(dy, False, wp, True, out, ops.DGELU, None, pre, False, 0, sums))
        cells = "  ".join(f"{k} {v:.4f} ({flops / v / 1e9:.0f})" for k, v in row.items())
        print(f"  {n:15s} {cells}  (GELU g and pre == shipped's, 8 cases: {same})")


if __name__ == "__main__":
    main()
