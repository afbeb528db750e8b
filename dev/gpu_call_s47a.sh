#!/usr/bin/env bash
# Prepared in session 46 for the next (~5 min, any card): where the GELU / GELU' GEMMs lose at C = 2048 (issue 11's
# C = 2048 row: s46c, dev/mlp_shapes.py, H100, cold: GELU (16384, 8192, 2048) 883.6 us and GELU' 824.0 against ~690
# for plain products of that size at ~800 TFLOP/s; 1.1x needs ~0.4 ms off the MLP's ~5.1 ms). Session 43's diagnostic
# split at C = 768 / 1024 (the gelu' store ~26 us, the GELU math ~25-34 us, the staged four-warpgroup structure 4-6
# us over the plain store) is repeated at C = 2048, where a tile's mainloop is twice C = 1024's:
#   trees .vnoaux (dev/patches/diag_mlp_noaux.patch: no gelu'(pre) store) and .vnomath (diag_mlp_nomath.patch: that
#   and gelu(x) -> x, the tile still staged through the epilogue warpgroup and TMA-stored); never merged.
#   1. dev/mlp_epilogue_ncu.py --C 2048 and --C 1024 in main, .vnoaux, .vnomath, alternated twice (do_bench medians
#      of the GELU, GELU' and plain-store GEMMs).
#   2. Nsight Compute on main's GELU and plain-store GEMMs at C = 2048 (speed of light, stall samples).
# Reading: if .vnomath is near the plain store, the GELU math / gelu' store (energy, issue slots) are the cost and
# the lead is less math (dev/README "Leads after session 46"); if .vnomath stays far above it, the 128 x 192 staged
# structure is, and the consumers-finish-their-own-tile pieces form for large K is the lead.
# Prep: for t in noaux nomath; do rm -rf .v$t && mkdir .v$t && git archive HEAD | tar -x -C .v$t &&
#   (cd .v$t && patch -p1 < ../dev/patches/diag_mlp_$t.patch); done; carry [".gpu_data", ".vnoaux", ".vnomath"]
export MAX_JOBS=8 BUILD_ARGS="--family mlp" VARIANTS=".vnoaux .vnomath" VARIANT_JOBS=4 VARIANT_BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-400}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for r in 1 2; do for C in 2048 1024; do epi . main${r}_$C $C 45; epi .vnoaux noaux${r}_$C $C 45; epi .vnomath nomath${r}_$C $C 45; done; done
epi_ncu 2048
rm -f $O/*.ncu-rep
(cd $O && tar -czf logs.tgz *.log *.txt *.csv && rm -rf *.log *.txt *.csv)
echo "all done at $((SECONDS - t0)) s"
