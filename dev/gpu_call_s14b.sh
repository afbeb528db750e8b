#!/usr/bin/env bash
# Prepared in session 13 for a later GPU call (issue 8): the Hopper attention backward with dq written by each
# head's last consumer (dev/patches/attention_dq_fused.patch: no separate dQ convert launch, which took 0.299 of the
# 3.645 ms of attention backward in a GPT-2 124M step), correct and timed beside main.
# Before the call (CPU machine):
#   rm -rf .variant && mkdir .variant && git archive HEAD | tar -x -C .variant && \
#     git apply --directory=.variant dev/patches/attention_dq_fused.patch
# Carry [".gpu_data", ".variant"].
# Only the attention family is timed: both trees build it at once (8 jobs each).
mkdir -p ${OUT:-out}
ext=$PWD/build/torch_extensions  # the lib's root: the later .variant steps look there too
(cd .variant && MAX_JOBS=8 TORCH_EXTENSIONS_DIR=$ext PYTHONPYCACHEPREFIX=/tmp/pyc python -m tk_kernels.build --family attention \
  > ${OUT:-out}/build_variant.log 2>&1; echo "variant build rc=$?" >> ${OUT:-out}/build_variant.log) &
BUILD_ARGS="--family attention" MAX_JOBS=8
source dev/gpu_call_lib.sh
wait; tail -1 $O/build_variant.log; echo "both builds at $((SECONDS - t0)) s"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(cd .variant && timeout $(rem 120) $cs --tool memcheck --error-exitcode 9 python bench/sanitize_attention.py --paths hopper > $O/san_variant.log 2>&1)
echo "== variant memcheck rc=$? $(grep 'ERROR SUMMARY' $O/san_variant.log)"
(cd .variant && step tests_variant 200 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf \
  tests/attention/test_attention_hopper_bwd_gpu.py tests/attention/test_attention_qkv_gpu.py tests/attention/test_attention_dropout_gpu.py)
tail -1 $O/tests_variant.log; grep -E "^FAILED|^ERROR" $O/tests_variant.log | head
S="16,12,1024,64;8,16,2048,64;64,6,256,64;8,16,2048,128"
step bench_main 120 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench_main.json
(cd .variant && step bench_variant 120 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench_variant.json)
grep -E "bwd" $O/bench_main.log | head -8; echo "-- variant"; grep -E "bwd" $O/bench_variant.log | head -8
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
