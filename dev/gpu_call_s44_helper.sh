#!/usr/bin/env bash
# Prepared in session 43 as session 44's first call (~5 min, any card); not run in session 44 (s44a went to the in-step attention):
#   1. .vhelp = main + dev/patches/mlp_gelu_helper_warps.patch with its staging alignment fixed (s43f ran it with
#      consumer 1's tile 512 B off a 1024-byte boundary: wrong output, 3-4% slower): the MLP GPU tests, racecheck /
#      memcheck of the epilogues, the four epilogue GEMMs alone at C = 768 / 1024 alternated with main. Read per
#      scheduler (dev/README "Leads after session 43"): schedulers 2 and 3 carry 4/3 of the old epilogue work.
#   2. issue 12's medium ratio on main after session 43's merges, torch and tk side by side (bench_train, graphs).
# Prep: rm -rf .vhelp && mkdir .vhelp && git archive HEAD | tar -x -C .vhelp &&
#   (cd .vhelp && patch -p1 < ../dev/patches/mlp_gelu_helper_warps.patch); carry [".gpu_data", ".vhelp"]
export MAX_JOBS=10 BUILD_ARGS=" " VARIANTS=".vhelp" VARIANT_JOBS=6 VARIANT_BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-420}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vhelp && step t_mlp 60 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp -x -k "not gpt_step"); tail -1 $O/t_mlp.log
grep -E "^FAILED|^ERROR" $O/t_mlp.log | head -5
ep() { (cd $1 && step epi_$2_$3 25 python dev/mlp_epilogue_ncu.py --C $3); echo "-- $2 C=$3"; grep TFLOP $O/epi_$2_$3.log | head -3; }
for r in 1 2; do for C in 768 1024; do ep . main$r $C; ep .vhelp help$r $C; done; done
SAN_SECS=60 san .vhelp help racecheck memcheck; wait
step med 150 python bench/bench_train.py --models gpt2-medium --kernels torch,tk --compile graphs --out $O/med
grep -E "tok/s|vs torch|gpt2-medium " $O/med.log | head -6
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log med)
echo "all done at $((SECONDS - t0)) s"
