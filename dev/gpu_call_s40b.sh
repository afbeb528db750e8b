#!/usr/bin/env bash
# Session 40, second call, right after gpu_call_s40_first.sh on the warm machine (~6 min): GPT-2's train step on main
# and on TREE alternated (train_abab: does the D = 64 one-consumer dQ of .vmb64 pay in the step?), then TREE's
# attention GPU tests if s40_first's ran out of time. Usage: bash dev/gpu_call_s40b.sh .vmb64 [tests]
# If both .vmb64 and .vep won in s40_first, their union is dev/patches/attention_bwd_one_wg_d64_tma_store.patch
# (compiled spill-free in session 39): rm -rf .vcomb && mkdir .vcomb && git archive HEAD | tar -x -C .vcomb &&
# (cd .vcomb && patch -p1 < ../dev/patches/attention_bwd_one_wg_d64_tma_store.patch); bash dev/gpu_call_s40b.sh .vcomb tests
# carry [".gpu_data", TREE]
T=${1:?tree}
export MAX_JOBS=16 BUILD_ARGS=" " VARIANTS="$T" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-400}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
train_abab $T
if [ "$2" = tests ]; then (cd $T && step t_att 170 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_att.log; fi
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log train_*)
echo "all done at $((SECONDS - t0)) s"
