#!/usr/bin/env bash
# Prepared in session 16 for the next GPU call (issue 8): the persistent D = 64 backward with a dynamic walk
# (dev/patches/attention_bwd_dynamic_walk.patch: the pipeline's scheduler::DYNAMIC, items taken from a global counter
# by the producer's atomicAdd and handed to the consumers through shared memory with the K / V buffer's barriers; the
# prep kernel zeroes the counter; producer 56 / consumers 224 registers at D = 64, spill-free) beside main (session
# 16's static boustrophedon walk lost 2.4% at causal (4,16,4096,64) against one CTA per key block).
# Compiled and SASS-checked on the CPU machine only (no spills, forward and MLP GEMM SASS unchanged); never run.
# Before the call (CPU machine):
#   rm -rf .variant && mkdir .variant && git archive HEAD | tar -x -C .variant && \
#     git apply --directory=.variant dev/patches/attention_bwd_dynamic_walk.patch
# Carry [".gpu_data", ".variant"]. Merge if memcheck / racecheck are clean, the tests pass and no D = 64 shape is slower.
mkdir -p ${OUT:-out}
ext=$PWD/build/torch_extensions
(cd .variant && MAX_JOBS=7 TORCH_EXTENSIONS_DIR=$ext PYTHONPYCACHEPREFIX=/tmp/pyc python -m tk_kernels.build --family attention \
  > ${OUT:-out}/build_variant.log 2>&1; echo "variant build rc=$?" >> ${OUT:-out}/build_variant.log) &
export BUILD_ARGS="--family attention" MAX_JOBS=8
source dev/gpu_call_lib.sh
wait; tail -1 $O/build_variant.log; echo "both builds at $((SECONDS - t0)) s"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(cd .variant && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 90) $cs --tool memcheck --error-exitcode 9 python bench/sanitize_attention.py \
  --paths hopper --batch 1 --heads 140 --seqlens 129,300,700 --head-dims 64 > $O/san_mem.log 2>&1)
echo "== memcheck rc=$? $(grep 'ERROR SUMMARY' $O/san_mem.log)"
(cd .variant && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 90) $cs --tool racecheck --error-exitcode 9 python bench/sanitize_attention.py \
  --paths hopper --batch 1 --heads 140 --seqlens 300 --head-dims 64 --dtypes bf16 > $O/san_race.log 2>&1)
echo "== racecheck rc=$? $(grep 'RACECHECK SUMMARY' $O/san_race.log)"
(cd .variant && step tests 200 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf \
  tests/attention/test_attention_hopper_bwd_gpu.py tests/attention/test_attention_dropout_gpu.py tests/attention/test_attention_qkv_gpu.py)
tail -3 $O/tests.log; grep -E "^FAILED|^ERROR" $O/tests.log | head -20
S="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
(cd .variant && step bench_dyn 60 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench_dyn.json)
step bench_main 60 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench_main.json
(cd .variant && step bench_dyn2 60 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench_dyn2.json)
grep -E "bwd" $O/bench_dyn.log | head -8; echo "-- main"; grep -E "bwd" $O/bench_main.log | head -8; echo "-- dyn again"; grep -E "bwd" $O/bench_dyn2.log | head -8
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
