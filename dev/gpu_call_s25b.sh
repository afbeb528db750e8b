#!/usr/bin/env bash
# Session 25: the attention projections (c_attn, c_proj) on the MLP family's GEMM (dispatch.linear, tk::linear_fwd /
# _bwd saving the forward's weight cast) with the bias gradients on our column-sum kernel (csrc/colsum.cu), beside
# main before it (.vbase = git archive of that HEAD). GPT-2's step A/B/A/B first, then the GPU tests of what changed,
# the pieces against cuBLAS (dev/proj_bench.py), then GPT-2 medium with what time is left.
# Prep: rm -rf .vbase && mkdir .vbase && git archive <main before> | tar -x -C .vbase
# Carry [".gpu_data", ".vbase"]. ~9.5 min.
export MAX_JOBS=8 VARIANTS=".vbase" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
train_abab .vbase
step mlp_tests 150 python -m pytest -m gpu -q -x -p no:cacheprovider tests/mlp
tail -3 $O/mlp_tests.log
step proj 100 python dev/proj_bench.py
grep "C=" $O/proj.log
step step_tests 150 python -m pytest -m gpu -q -x -p no:cacheprovider tests/train/test_cuda_graphs_gpu.py \
  tests/classifier/test_classifier_gpu.py::test_50_training_steps_match_torch
tail -3 $O/step_tests.log
step medium_new 120 python bench/bench_train.py --models gpt2-medium --kernels torch,tk --compile graphs --out $O/medium_new
grep "tok/s" $O/medium_new.log | head -2
(cd .vbase && step medium_base 70 python bench/bench_train.py --models gpt2-medium --kernels tk --compile graphs --out $O/medium_base)
grep "tok/s" $O/medium_base.log | head -1
echo "all done at $((SECONDS - t0)) s"
