#!/usr/bin/env bash
# Session 24: the MLP family's column-sum kernel (csrc/colsum.cu) for db_fc and db_proj.
#   working tree = the change;  .vbase = HEAD (git archive) for the A/B
# Prep: rm -rf .vbase && mkdir .vbase && git archive HEAD | tar -x -C .vbase && git apply dev/patches/mlp_column_sums.patch (the change, in the working tree)
# Carry [".gpu_data", ".vbase"]. ~8 min.
export MAX_JOBS=8 VARIANTS=".vbase" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step tests 150 python -m pytest -m gpu tests/mlp -q -x -k "column_sums or mlp_forward_backward or linear or opcheck or graph or compiled"
tail -3 $O/tests.log
step colsum 40 python dev/colsum_bench.py; cat $O/colsum.log
train_abab .vbase
step mlp_new 70 python bench/bench_mlp.py --skip-gemm; tail -6 $O/mlp_new.log
(cd .vbase && step mlp_base 70 python bench/bench_mlp.py --skip-gemm); tail -6 $O/mlp_base.log
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log train_* 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
