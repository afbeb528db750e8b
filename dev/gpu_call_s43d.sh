#!/usr/bin/env bash
# Session 43's fourth call (~4 min, any card): where the GELU GEMM's extra time goes (issue 12's medium gap: the
# fc forward with bias + GELU + gelu' takes 285 us at (16384, 4096, 1024) against 198 for the plain store, s43c).
# Diagnostic trees (never merged): .vnoaux = HEAD with the epilogue warpgroup's gelu'(pre) write removed; .vnomath =
# that and gelu(x) replaced by x (the staged tile copied through the epilogue warpgroup and TMA-stored unchanged).
# dev/mlp_epilogue_ncu.py (do_bench medians of the four epilogues) at C = 768 and 1024 in each tree, alternated twice;
# then Nsight Compute stall samples and speed-of-light of main's GELU and plain-store GEMMs at C = 1024.
# Prep: for t in .vnoaux .vnomath; do rm -rf $t && mkdir $t && git archive HEAD | tar -x -C $t; done, then the edits
#   in bench/RESULTS.md "session 43" (two lines of finish_chunk / finish_half); carry [".gpu_data", ".vnoaux", ".vnomath"]
export MAX_JOBS=8 BUILD_ARGS="--family mlp" VARIANTS=".vnoaux .vnomath" VARIANT_JOBS=4 VARIANT_BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-330}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
for r in 1 2; do for C in 768 1024; do epi . main${r}_$C $C 30; epi .vnoaux noaux${r}_$C $C 30; epi .vnomath nomath${r}_$C $C 30; done; done
epi_ncu 1024
rm -f $O/*.ncu-rep
(cd $O && tar -czf logs.tgz *.log *.txt *.csv && rm -rf *.log *.txt *.csv)
echo "all done at $((SECONDS - t0)) s"
