#!/usr/bin/env bash
# Session 41, second call, right after gpu_call_s41a.sh on the warm machine (~6 min): GPT-2's train step (bench_train.py
# --compile graphs) on main and on TREE alternated (train_abab). Session 40 merged the one-consumer dQ without timing
# the step (no device time left): TREE = .vold, main before it (9771e20), says what it gave GPT-2's step; or .vep if
# s41a's TMA stores won. Usage: bash dev/gpu_call_s41b.sh .vold
# Prep: rm -rf .vold && mkdir .vold && git archive 9771e20 | tar -x -C .vold; carry [".gpu_data", ".vold"]
T=${1:?tree}
export MAX_JOBS=16 BUILD_ARGS=" " VARIANTS="$T" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-400}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
train_abab $T
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log train_*)
echo "all done at $((SECONDS - t0)) s"
