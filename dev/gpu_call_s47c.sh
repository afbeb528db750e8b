#!/usr/bin/env bash
# Session 47, third call (~3 min, any card): the GELU' GEMM's B layout. s47b (H100, do_bench, us, C = 2048): main
# 997 / 1014, without its gelu' read and product 958 / 949, without cluster pairs 1115 / 1119, plain store of the same
# product 837-849; Nsight Compute: the consumers wait on the ring's full barriers (long_sb 44% against 21% for the plain
# store). The forward's GELU GEMM (K-major B, same 128 x 192 tiles) without its math is only 12-17 us over its plain
# store, so the MN-major B of 3 boxes, split by K in 32-row halves between the pair, is suspect. Trees (never merged):
#   .vdgsplit = main + dev/patches/diag_mlp_dgsplit.patch: the 3 boxes split unevenly (rank 0 boxes 0 and 2, rank 1
#               box 1), full 64-row boxes
#   .vdgkk    = main + dev/patches/diag_mlp_dgkk.patch: the GELU' GEMM on a K-major copy of W_proj (W_proj^T made
#               contiguous outside the timing), as the forward's layout
#   dev/mlp_epilogue_ncu.py --C 2048 / 1024 in main, .vdgsplit, .vdgkk, alternated twice; then the transpose's cost.
# Prep: for t in dgsplit dgkk; do rm -rf .v$t && mkdir .v$t && git archive HEAD | tar -x -C .v$t &&
#   (cd .v$t && patch -p1 < ../dev/patches/diag_mlp_$t.patch); done; carry [".gpu_data", ".vdgsplit", ".vdgkk"]
export MAX_JOBS=8 BUILD_ARGS="--family mlp" VARIANTS=".vdgsplit .vdgkk" VARIANT_JOBS=4 VARIANT_BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-400}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for r in 1 2; do for C in 2048 1024; do epi . main${r}_$C $C 45; epi .vdgsplit dgsplit${r}_$C $C 45; epi .vdgkk dgkk${r}_$C $C 45; done; done
step transpose 30 python -c "
import torch
from triton.testing import do_bench
for C in (768, 1024, 2048):
    w = torch.randn(C, 4 * C, device='cuda', dtype=torch.bfloat16)
    print(C, 'W_proj^T contiguous', round(do_bench(lambda: w.t().contiguous(), warmup=50, rep=200) * 1e3, 1), 'us')
"; cat $O/transpose.log
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
