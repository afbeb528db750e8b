#!/usr/bin/env bash
# Session 47, second call (~4 min, any card): why the GELU' GEMM loses more than the GELU GEMM at C = 2048. s47a
# (H100, do_bench medians, us): dgelu dy W_proj (* gelu') 984-991 against 827-834 for the plain store of the same
# product at C = 2048 (+155 us, +19%), 241 against 198 at C = 1024 (+43 us, +22%): the overhead grows with the
# product (K), not with the output, which points at the mainloop (128 x 192 tiles, the MN-major B split by K between
# the pair's CTAs in 32-row boxes, 128-register consumers), while the forward's GELU GEMM without its math and gelu'
# store is only 12-17 us over the plain store. Trees (never merged; prep below):
#   .vdgcl1   = main + dev/patches/diag_mlp_dgcl1.patch: the GELU' GEMM without cluster pairs (each CTA loads its B)
#   .vdgnoaux = main + dev/patches/diag_mlp_dgnoaux.patch: the GELU' GEMM reads no gelu' and multiplies by nothing
#   1. dev/mlp_epilogue_ncu.py --C 2048 / 1024 in main, .vdgcl1, .vdgnoaux, alternated twice; main with --sums.
#   2. Nsight Compute on main's GELU' and its plain store at C = 2048.
# Prep: for t in dgcl1 dgnoaux; do rm -rf .v$t && mkdir .v$t && git archive HEAD | tar -x -C .v$t &&
#   (cd .v$t && patch -p1 < ../dev/patches/diag_mlp_$t.patch); done; carry [".gpu_data", ".vdgcl1", ".vdgnoaux"]
export MAX_JOBS=8 BUILD_ARGS="--family mlp" VARIANTS=".vdgcl1 .vdgnoaux" VARIANT_JOBS=4 VARIANT_BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-400}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for r in 1 2; do for C in 2048 1024; do epi . main${r}_$C $C 45; epi .vdgcl1 dgcl1${r}_$C $C 45; epi .vdgnoaux dgnoaux${r}_$C $C 45; done; done
for C in 2048 1024; do step epi_sums_$C 45 python dev/mlp_epilogue_ncu.py --C $C --sums; echo "-- sums $C"; grep dgelu $O/epi_sums_$C.log; done
epi_ncu 2048 "10:dgelu 11:dstore"
rm -f $O/*.ncu-rep
(cd $O && tar -czf logs.tgz *.log *.txt *.csv && rm -rf *.log *.txt *.csv)
echo "all done at $((SECONDS - t0)) s"
