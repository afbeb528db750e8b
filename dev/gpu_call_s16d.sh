#!/usr/bin/env bash
# Session 16 (issue 8): the Hopper backward at D = 64 on a persistent grid with two K / V buffers (pipeline
# ITEM_STAGES = 2, ITEM_IN_DRAIN), in the working tree; `.variant/` = HEAD (one CTA per key block), built beside it;
# `.variant2/` = HEAD + the D = 128 forward's L2 prefetch of the next item's Q and first K / V tile (P::prefetch_item,
# tma::prefetch_l2), only timed (it adds prefetches, nothing else; bench_attention checks its outputs against cuDNN).
# Before the call (CPU machine): rm -rf .variant && mkdir .variant && git archive HEAD | tar -x -C .variant
# Carry [".gpu_data", ".variant", ".variant2"].
mkdir -p ${OUT:-out}
ext=$PWD/build/torch_extensions
for v in .variant .variant2; do
  (cd $v && MAX_JOBS=5 TORCH_EXTENSIONS_DIR=$ext PYTHONPYCACHEPREFIX=/tmp/pyc python -m tk_kernels.build --family attention \
    > ${OUT:-out}/build$v.log 2>&1; echo "$v build rc=$?" >> ${OUT:-out}/build$v.log) &
done
BUILD_ARGS="--family attention" MAX_JOBS=6
source dev/gpu_call_lib.sh
wait; tail -qn1 $O/build.variant.log $O/build.variant2.log; echo "all builds at $((SECONDS - t0)) s"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 90) $cs --tool memcheck --error-exitcode 9 python bench/sanitize_attention.py \
  --paths hopper --batch 1 --heads 140 --seqlens 129,300 --head-dims 64 > $O/san_mem.log 2>&1
echo "== memcheck rc=$? $(grep 'ERROR SUMMARY' $O/san_mem.log)"
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 90) $cs --tool racecheck --error-exitcode 9 python bench/sanitize_attention.py \
  --paths hopper --batch 1 --heads 140 --seqlens 300 --head-dims 64 --dtypes bf16 > $O/san_race.log 2>&1
echo "== racecheck rc=$? $(grep 'RACECHECK SUMMARY' $O/san_race.log)"
step tests 200 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/attention/test_attention_hopper_bwd_gpu.py \
  tests/attention/test_attention_gpu.py tests/attention/test_attention_dropout_gpu.py tests/attention/test_attention_qkv_gpu.py
tail -1 $O/tests.log; grep -E "^FAILED|^ERROR" $O/tests.log | head -20
S="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64;8,16,2048,128"
step bench_new 100 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench_new.json
(cd .variant && step bench_main 100 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench_main.json)
(cd .variant2 && step bench_pf 100 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S;4,16,4096,128" --json $O/bench_pf.json)
grep -E "bwd" $O/bench_new.log | head -10; echo "-- main"; grep -E "bwd" $O/bench_main.log | head -10; echo "-- prefetch"; grep -E "bwd" $O/bench_pf.log | head -12
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
