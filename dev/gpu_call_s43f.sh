#!/usr/bin/env bash
# Session 43's last call (~2.5 min after the start; 292 s of device time were left): main's working tree = HEAD + two
# of the producer warpgroup's idle warps finishing box 2 of every staged GELU / GELU' half (tk::pipeline
# HELPER_WARPS; the epilogue warpgroup keeps boxes 0 and 1: 8 chunks a thread a half for both) against .vbase (HEAD).
# Order (so that a cut call still answers the first questions): build the MLP family in both trees, the MLP GPU tests
# (not the GPT step, which builds every family), the four epilogue GEMMs alone at C = 768 / 1024 alternated, then
# racecheck and memcheck of the epilogues.
# Prep: rm -rf .vbase && mkdir .vbase && git archive HEAD | tar -x -C .vbase; carry [".gpu_data", ".vbase"]
export MAX_JOBS=8 BUILD_ARGS="--family mlp" VARIANTS=".vbase" VARIANT_JOBS=8 VARIANT_BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-185}
source dev/gpu_call_lib.sh
step t_mlp 40 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp -x -k "not gpt_step"; tail -1 $O/t_mlp.log; grep -E "^FAILED|^ERROR" $O/t_mlp.log | head -5
ep() { (cd $1 && step epi_$2_$3 20 python dev/mlp_epilogue_ncu.py --C $3); echo "-- $2 C=$3"; grep TFLOP $O/epi_$2_$3.log | head -3; }
for C in 768 1024; do ep . new $C; ep .vbase base $C; done; ep . new2 1024
SAN_SECS=40 san . new racecheck memcheck; wait
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
