#!/usr/bin/env bash
# Session 16, first call. The working tree: main + dev/patches/mlp_eager_function.patch (the MLP op's eager path as an
# autograd.Function) + the Hopper forward with two Q buffers at D = 64 (pipeline ITEM_STAGES = 2: the producer loads the
# next item's Q and first K / V tile while the consumers still work on this item). `.variant/` = main + the MLP patch
# only, i.e. the forward as shipped, built beside it and timed in the next process.
# Before the call (CPU machine):
#   rm -rf .variant && mkdir .variant && git archive HEAD | tar -x -C .variant && \
#     git apply --directory=.variant dev/patches/mlp_eager_function.patch
# Carry [".gpu_data", ".variant"].
# (Both changes are merged since: 13b883a, 46c0470; the patch file is in git at 139c98a.)
mkdir -p ${OUT:-out}
ext=$PWD/build/torch_extensions
(cd .variant && MAX_JOBS=6 TORCH_EXTENSIONS_DIR=$ext PYTHONPYCACHEPREFIX=/tmp/pyc python -m tk_kernels.build --family attention \
  > ${OUT:-out}/build_variant.log 2>&1; echo "variant build rc=$?" >> ${OUT:-out}/build_variant.log) &
MAX_JOBS=10
source dev/gpu_call_lib.sh
wait; tail -1 $O/build_variant.log; echo "both builds at $((SECONDS - t0)) s"
step tests 230 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/model \
  tests/attention/test_attention_gpu.py tests/attention/test_attention_dropout_gpu.py tests/attention/test_attention_qkv_gpu.py
tail -1 $O/tests.log; grep -E "^FAILED|^ERROR" $O/tests.log | head -20
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# 2-3 items per CTA (280 / 420 items on 132 SMs), so the second Q buffer and its barriers are used
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 90) $cs --tool memcheck --error-exitcode 9 python bench/sanitize_attention.py \
  --paths hopper --batch 1 --heads 140 --seqlens 129,300 --head-dims 64 > $O/san_mem.log 2>&1
echo "== memcheck rc=$? $(grep 'ERROR SUMMARY' $O/san_mem.log)"
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 90) $cs --tool racecheck --error-exitcode 9 python bench/sanitize_attention.py \
  --paths hopper --batch 1 --heads 140 --seqlens 129 --head-dims 64 --dtypes bf16 > $O/san_race.log 2>&1
echo "== racecheck rc=$? $(grep 'ERROR SUMMARY' $O/san_race.log)"
S="16,12,1024,64;8,16,2048,64;64,6,256,64;8,16,2048,128"
step bench_new 100 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench_new.json
(cd .variant && step bench_main 100 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench_main.json)
grep -E "fwd" $O/bench_new.log | head -8; echo "-- main"; grep -E "fwd" $O/bench_main.log | head -8
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
