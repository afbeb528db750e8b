#!/usr/bin/env bash
# Prepared in session 25 for session 26's first call: both of session 25's untested patches in ONE call (one cold start,
# one build round; gpu_call_s26a.sh / s26b.sh are the same steps one patch at a time).
#   .vdb = HEAD + dev/patches/linear_db_in_dx_gemm.patch        (the linear op's db inside its dX GEMM)
#   .vds = HEAD + dev/patches/attention_dropout_causal_skip.patch (issue 9: the causal Philox skip)
# Prep:
#   for v in vdb:linear_db_in_dx_gemm vds:attention_dropout_causal_skip; do t=.${v%%:*}; rm -rf $t && mkdir $t &&
#     git archive HEAD | tar -x -C $t && (cd $t && patch -p1 < ../dev/patches/${v#*:}.patch); done
# Carry [".gpu_data", ".vdb", ".vds"]. ~9.5 min. Merge what passes its tests and wins its A/B.
export MAX_JOBS=6 VARIANTS=".vdb .vds" VARIANT_JOBS=5 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
# 1. the linear op's db in its dX GEMM: tests (the new GPU tests of session 25 included), the GPT-2 step alternated
(cd .vdb && step mlp_tests 120 python -m pytest -m gpu -q -x -p no:cacheprovider tests/mlp)
tail -1 $O/mlp_tests.log
train_abab .vdb
# 2. the causal Philox skip: the Hopper part of the dropout GPU matrix, then the overhead alternated
(cd .vds && step drop_tests 120 python -m pytest -m gpu -q -x -p no:cacheprovider tests/attention/test_attention_dropout_gpu.py -k "hopper or same_mask")
tail -1 $O/drop_tests.log
ab() { step $1 45 python bench/bench_attention_dropout.py --graphs --impls tk; grep -E "tk|overhead" $O/$1.log | head -8; }
ab drop_a; (cd .vds && ab drop_b); ab drop_c; (cd .vds && ab drop_d)
# 3. with what time is left: the A_SUMS GEMM against the plain one
(cd .vdb && step proj 90 python dev/proj_bench.py)
grep "C=" $O/proj.log | grep -E "dX"
echo "all done at $((SECONDS - t0)) s"
