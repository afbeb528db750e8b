#!/usr/bin/env bash
# Session 29's second call: the c_proj biases moved into the following add + LayerNorm (.vbias = main + the
# delta_bias change: tk_kernels/families/layernorm, dispatch.py, model.py, tests; issue 12), in order of value:
#   1. dev/ln_delta_bias_check.py --time: the LayerNorm op's fwd + bwd with and without delta_bias;
#   2. GPT-2's step (bench_train --compile graphs), torch and tk here, tk in .vbias, alternated (train_abab);
#   3. .vbias's GPU tests: tests/layernorm, the classifier's 50 steps and compiled step, tests/train CUDA graphs;
#   4. compute-sanitizer memcheck and racecheck on the kernels with delta_bias (dev/ln_delta_bias_check.py).
# Carry [".gpu_data", ".vbias"]. LIMIT (default 480 s).
export MAX_JOBS=8 VARIANTS=".vbias" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-480}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vbias && step ln_time 40 python dev/ln_delta_bias_check.py --time); grep -E "^C=" $O/ln_time.log
train_abab .vbias
(cd $O && tar -czf train.tgz train_? && rm -rf train_?)
(cd .vbias && step ln_tests 150 python -m pytest -m gpu -q -x -p no:cacheprovider tests/layernorm); tail -2 $O/ln_tests.log
(cd .vbias && step model_tests 100 python -m pytest -m gpu -q -x -p no:cacheprovider tests/train/test_cuda_graphs_gpu.py \
   tests/classifier/test_classifier_gpu.py -k "50_training_steps or compiled_gpt or reduce_overhead"); tail -2 $O/model_tests.log
sanitize .vbias 60 python dev/ln_delta_bias_check.py
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)  # the device returns at most 8 files
echo "all done at $((SECONDS - t0)) s"
