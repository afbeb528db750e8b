#!/usr/bin/env bash
# Session 25, last call: the projections on the linear op with cuBLAS's GEMMs (projection_op: the forward exactly
# autocast's F.linear, dX torch.mm, dW fp32 out of cuBLAS, db our column sums, the weight cast saved) beside main
# before them (.vbase). s25c had put our GEMM behind cuBLAS in the step for the projections' forwards and dX.
# The linear tests first, GPT-2 A/B/A/B (with torch for the ratio), GPT-2 medium A/B/A/B, then the model-level GPU
# tests. Carry [".gpu_data", ".vbase"]. ~6 min; LIMIT=380 keeps it inside session 25's last device time.
export MAX_JOBS=8 VARIANTS=".vbase" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-380}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step lin_tests 60 python -m pytest -m gpu -q -x -p no:cacheprovider tests/mlp -k "linear or opcheck or column or compiled or capture"
tail -1 $O/lin_tests.log
train_abab .vbase
med() { step $1 60 python bench/bench_train.py --models gpt2-medium --kernels tk --compile graphs --out $O/$1; grep "tok/s" $O/$1.log | head -1; }
med med_a; (cd .vbase && med med_b); med med_c; (cd .vbase && med med_d)
step step_tests 120 python -m pytest -m gpu -q -x -p no:cacheprovider tests/train/test_cuda_graphs_gpu.py \
  tests/classifier/test_classifier_gpu.py::test_50_training_steps_match_torch
tail -1 $O/step_tests.log
echo "all done at $((SECONDS - t0)) s"
