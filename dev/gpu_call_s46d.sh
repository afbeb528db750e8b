#!/usr/bin/env bash
# Session 46 (~5 min, any card): 16-bit weight gradients straight from cuBLAS. s46c's profile of bench_mlp's tk step at
# C = 2048 (bf16 parameters) had 0.067 ms a step in bf16 casts of the fp32 weight gradients; ops._weight_grad now asks
# cuBLAS for the parameters' 16-bit dtype directly when it is the operands' (one rounding, as PyTorch's backward).
#   1. the working tree: pytest -m gpu tests/mlp.
#   2. bench_mlp.py --skip-gemm (MLP fwd+bwd, C = 768 / 1024 / 2048), .vbase (= HEAD) and the working tree alternated.
# Prep: rm -rf .vbase; mkdir .vbase; git archive HEAD | tar -x -C .vbase; carry [".gpu_data", ".vbase"]
export MAX_JOBS=10 BUILD_ARGS="--family mlp" VARIANTS=".vbase" VARIANT_JOBS=6 VARIANT_BUILD_ARGS="--family mlp" LIMIT=${LIMIT:-400}
source dev/gpu_call_lib.sh
step t_mlp 90 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp -x; tail -1 $O/t_mlp.log
grep -E "^FAILED|^ERROR" $O/t_mlp.log | head -5
for r in b1 n1 b2 n2; do
  t=$([ ${r:0:1} = b ] && echo .vbase || echo .)
  (cd $t && step mlp_$r 75 python bench/bench_mlp.py --skip-gemm); echo "-- $t $r"; grep -E "^ 16384" $O/mlp_$r.log
done
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
