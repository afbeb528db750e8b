#!/usr/bin/env bash
# The next session's first call: dev/patches/layernorm_delta_bias.patch (the c_proj biases added in the following
# add + LayerNorm kernel; issue 12) to merge once its LayerNorm GPU tests have run (sessions 29's calls ran the
# dropout file, the model tests and the sanitizers on it, not tests/layernorm/test_layernorm_gpu.py):
#   1. .vbias's GPU tests: all of tests/layernorm (no -x), then the classifier's 50 steps / compiled GPT step and
#      tests/train/test_cuda_graphs_gpu.py;
#   2. GPT-2's step (bench_train --compile graphs), torch and tk here, tk in .vbias, alternated (train_abab);
#   3. compute-sanitizer memcheck / racecheck on the kernels with delta_bias (dev/ln_delta_bias_check.py).
# Prep: rm -rf .vbias && mkdir .vbias && git archive HEAD | tar -x -C .vbias && (cd .vbias && patch -p1 <
#   ../dev/patches/layernorm_delta_bias.patch). Carry [".gpu_data", ".vbias"]. LIMIT (default 540 s).
# Merge (git apply the patch, rm it) if every test passes and the step is not slower.
#   4. (only on an H200, and with .vpair carried: git archive HEAD + dev/patches/softmax_xent_pair_helper.patch) the
#      CTA-pair softmax kernel beside main's (dev/softmax_xent_ab.py, alternated; the H100 showed no gain, s29a).
export MAX_JOBS=8 VARIANTS=".vbias" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-540}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vbias && step ln_tests 200 python -m pytest -m gpu -q -p no:cacheprovider tests/layernorm); tail -3 $O/ln_tests.log
(cd .vbias && step model_tests 110 python -m pytest -m gpu -q -p no:cacheprovider tests/train/test_cuda_graphs_gpu.py \
   tests/classifier/test_classifier_gpu.py -k "50_training_steps or compiled_gpt or reduce_overhead"); tail -2 $O/model_tests.log
train_abab .vbias
(cd $O && tar -czf train.tgz train_? && rm -rf train_?)
sanitize .vbias 40 python dev/ln_delta_bias_check.py
if [ -d .vpair ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  (cd .vpair && MAX_JOBS=8 python -m tk_kernels.build --family classifier > $O/build.vpair.log 2>&1)
  sx() { (cd $1 && step sx_$2 30 python dev/softmax_xent_ab.py); echo "-- $2"; grep -E "^kernel rows=2048|^op" $O/sx_$2.log; }
  sx . base1; sx .vpair pair1; sx . base2; sx .vpair pair2
fi
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)  # the device returns at most 8 files
echo "all done at $((SECONDS - t0)) s"
