"""Variants of the Hopper attention forward (csrc/hopper_forward.cu) side by side on one sm_90 GPU.

    python dev/hopper/check_fwd_variants.py                    # every variant below, about 2-3 minutes
    python dev/hopper/check_fwd_variants.py --variants overlap --quick

Each variant is the shipped source with a few text substitutions, built into its own extension
(build.build with a copied package dir). Per variant: the float64 accuracy cases of
dev/hopper/check_attention.py (o and lse vs float64, strided qkv views, ragged T, both dtypes, D 64 / 128,
causal or not), then the forward alone, timed interleaved with the shipped kernel and cuDNN at the
issue's shapes (do_bench medians, bf16, contiguous q/k/v), with dropout 0 and 0.2. Not shipped: a winner
goes into the kernel, with its numbers in the header comment.

Variants:
  overlap   intra-warpgroup overlap: the softmax of S_j runs while P_{j-1} V_{j-1} is still on the tensor
            cores. The kernel already issues in that order, but ptxas (CUDA 13) schedules the wait for
            P V (WARPGROUP.DEPBAR.LE gsb0, 0x0) above the exp2s, so the softmax runs after P V. A volatile
            shared-memory store of the row sums (which depend on every exp2 of the tile) between the
            softmax and the wait keeps them above it: seen on this CPU machine in the SASS of all 16
            instances (exp2 block before the loop's DEPBAR 0x0), +8..16 instructions, no spills.
  poly8     overlap + 1 in 8 of the softmax's exponentials computed on the FMA / integer pipes instead of
  poly4     the MUFU (1 in 4 for poly4), as FlashAttention-4 does on Blackwell: at D = 64 a tile's 2^x
            (16 per SM per clock on sm_90) cost about as much time as its two GEMMs (4 D FLOP per element
            against 1 exponential: 989 TFLOP/s vs 3.9 T exp/s on an H100), so the MUFU may bound the
            softmax. exp2_poly3: round-to-nearest split x = n + r with the 1.5 * 2^23 trick, a degree-3
            fit of 2^r on [-0.5, 0.5] (max relative error 7.5e-5 in fp32 Horner, measured on 20001 points
            here; P then rounds to 16 bits, 3.9e-3), n added to the exponent bits; x clamped at -126
            (masked -inf gives ~1e-38, not 0: negligible in P V and in the row sum).
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import check_attention as ca  # noqa: E402  (dev/hopper/check_attention.py: accuracy cases, watchdog)
from tk_kernels import build as tkbuild  # noqa: E402
from dev.variant_pkg import variant_pkg  # noqa: E402

FWD = "hopper_forward.cu"
SINK = """
    if (j > 0) {  // (variant overlap) keeps every exp2 above the wait for P V
      __shared__ float hop_sink[NC][wg::WARPGROUP_THREADS];
      *reinterpret_cast<volatile float *>(&hop_sink[c][me]) = l_run[0] + l_run[1];
    }"""
EXP2_POLY3 = """
// (dev variant) 2^x for x <= 0 without the MUFU: x = n + r, n = round(x), 2^r by a degree-3 polynomial.
__device__ __forceinline__ float exp2_poly3(float x) {
  x = fmaxf(x, -126.f);
  const float t = __fadd_rn(x, 12582912.f);             // 1.5 * 2^23: n in the low mantissa bits of t
  const float r = __fsub_rn(x, __fsub_rn(t, 12582912.f));  // in [-0.5, 0.5]
  const float p = fmaf(fmaf(fmaf(0.05517132f, r, 0.24261054f), r, 0.69326097f), r, 0.99992812f);
  return __int_as_float(__float_as_int(p) + (__float_as_int(t) << 23));
}

}  // namespace tk
"""
EXP_LINE = "x = fast_exp2(fmaf(x, sc, -mc));"


def poly(select: str):
    """The softmax's exponential of element (q, e) on the polynomial where `select` holds (unrolled
    loop indices: a compile-time choice per register)."""
    return [("include/common/util.cuh", [("\n}  // namespace tk\n", EXP2_POLY3)]),
            (FWD, [(EXP_LINE, f"x = ({select}) ? exp2_poly3(fmaf(x, sc, -mc)) : fast_exp2(fmaf(x, sc, -mc));")])]


# name -> [(file under the package dir, or under families/attention/csrc,
#           [alternative (old, new) pairs: the first whose old text is in the file applies])]
VARIANTS = {
    "overlap": [(FWD, [
        # the kernel on the pipeline template (branch s5-attn-pipeline and later)
        ("    softmax(j);\n    if (j > 0) wg::mma_wait<0>(o.v);",
         "    softmax(j);" + SINK + "\n    if (j > 0) wg::mma_wait<0>(o.v);"),
        # the hand-written kernel (main before the template port): its loop always has j > 0
        ("      softmax(j, r0, alpha);\n      wg::mma_wait<0>(o.v);",
         "      softmax(j, r0, alpha);" + SINK.replace("\n    ", "\n      ").replace("if (j > 0) ", "") +
         "\n      wg::mma_wait<0>(o.v);"),
    ])],
}
VARIANTS["poly8"] = VARIANTS["overlap"] + poly("e == 1 && q % 4 == 3")
VARIANTS["poly4"] = VARIANTS["overlap"] + poly("e == 1 && q % 2 == 1")
SHAPES = [(16, 12, 1024, 64), (8, 16, 2048, 64), (4, 16, 4096, 64), (8, 16, 2048, 128), (4, 16, 4096, 128),
          (2, 16, 8192, 128), (1, 16, 16384, 128), (64, 6, 256, 64)]
QUICK_SHAPES = [(16, 12, 1024, 64), (8, 16, 2048, 128), (64, 6, 256, 64)]


def build_variant(name: str, subs, tmp: Path):
    pkg = variant_pkg("attention", name, [], tmp)  # then this script's first-match substitutions
    dst = pkg / "families" / "attention" / "csrc"
    for fname, alternatives in subs:
        path = pkg / fname if "/" in fname else dst / fname
        text = path.read_text()
        for old, new in alternatives:
            if old in text:
                text = text.replace(old, new, 1)
                break
        else:
            raise SystemExit(f"variant {name}: none of its texts is in {fname} (the shipped source changed)")
        path.write_text(text)
    module, _ = tkbuild.build("attention", pkg_dir=pkg, quiet=True)
    return module


def bench(exts: dict, shapes) -> None:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from triton.testing import do_bench

    def cudnn(q, k, v, causal, sc, p):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sc, dropout_p=p)

    impls = {n: (lambda e: lambda q, k, v, causal, sc, p: e.attention_forward_hopper(q, k, v, causal, sc, p))(e)
             for n, e in exts.items()}
    impls["cudnn"] = cudnn
    names = list(impls)
    print("\nforward TFLOP/s (do_bench median, bf16, contiguous q/k/v; dropout p: the kernel draws its mask)")
    print(f"{'(B,H,T,D)':18s} {'mask':6s} {'p':>4s}" + "".join(f"{n:>10s}" for n in names) +
          "".join(f"{'x' + n:>10s}" for n in names[1:] if n != "cudnn") + f"{'ship/cudnn':>11s}")
    for B, H, T, D in shapes:
        q, k, v = (t.contiguous() for t in ca.qkv_views(B, H, T, D, torch.bfloat16, seed=7))
        sc = 1.0 / math.sqrt(D)
        for causal in (True, False):
            for p in (0.0, 0.2):
                flop = 4 * B * H * T * T * D / (2 if causal else 1)
                ms = {n: [] for n in names}
                for _ in range(2):  # interleaved rounds: drift hits every variant alike
                    for n, fn in impls.items():
                        ca.progress(f"bench {n} {(B, H, T, D)} causal={causal} p={p}")
                        fn(q, k, v, causal, sc, p)
                        torch.cuda.synchronize()
                        ms[n].append(do_bench(lambda: fn(q, k, v, causal, sc, p), warmup=25, rep=100,
                                              return_mode="median"))
                tf = {n: flop / min(v_) / 1e9 for n, v_ in ms.items()}
                row = f"{str((B, H, T, D)):18s} {'causal' if causal else 'full':6s} {p:4.1f}" + "".join(
                    f"{tf[n]:10.0f}" for n in names)
                row += "".join(f"{tf[n] / tf['shipped']:10.3f}" for n in names[1:] if n != "cudnn")
                print(row + f"{tf['shipped'] / tf['cudnn']:11.2f}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated names (default: all)")
    ap.add_argument("--quick", action="store_true", help="fewer accuracy cases and timing shapes")
    args = ap.parse_args()
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() != (9, 0):
        print("needs an sm_90 GPU (H100 / H200)")
        return 2
    names = [n for n in args.variants.split(",") if n]
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        print(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
        return 2
    ca.progress("build", limit_s=1200.0)
    ca.watchdog()
    t0 = time.time()
    exts = {"shipped": tkbuild.load_extension("attention")}
    with tempfile.TemporaryDirectory() as tmp:
        for n in names:
            exts[n] = build_variant(n, VARIANTS[n], Path(tmp))
    print(f"{len(exts)} extensions ready in {time.time() - t0:.0f} s; torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    failures = 0
    for n, e in exts.items():
        if n == "shipped":
            continue
        print(f"\n== {n}: accuracy")
        f = ca.check_forward(e, args.quick)
        print(f"{n}: {'all forward checks passed' if f == 0 else f'{f} CHECKS FAILED'}", flush=True)
        failures += f
    bench(exts, QUICK_SHAPES if args.quick else SHAPES)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
