#!/usr/bin/env bash
# Prepared in session 16 for the call after gpu_call_s17a.sh (issue 8): the causal D = 64 Hopper forward with a
# dynamic walk (dev/patches/attention_fwd_dynamic_walk.patch, on top of attention_bwd_dynamic_walk.patch, whose
# pipeline scheduler::DYNAMIC it uses: CTA i takes item i, then the next item of a global counter by the producer's
# atomicAdd, heaviest query blocks first in every group; the counter is an int32 zero-filled by the binding per call,
# an extra fill kernel of ~2 us; producer 56 / consumers 224 registers there, spill-free; the other forward instances'
# SASS unchanged in instruction counts). The static walk's load model put its busiest CTA at 1.03-1.09x the mean.
# Compiled on the CPU machine only, never run. If it wins, the fill kernel is the next thing to remove.
# Before the call (CPU machine):
#   rm -rf .variant3 && mkdir .variant3 && git archive HEAD | tar -x -C .variant3 && \
#     git apply --directory=.variant3 dev/patches/attention_bwd_dynamic_walk.patch && \
#     git apply --directory=.variant3 dev/patches/attention_fwd_dynamic_walk.patch
# Carry [".gpu_data", ".variant3"].
mkdir -p ${OUT:-out}
ext=$PWD/build/torch_extensions
(cd .variant3 && MAX_JOBS=7 TORCH_EXTENSIONS_DIR=$ext PYTHONPYCACHEPREFIX=/tmp/pyc python -m tk_kernels.build --family attention \
  > ${OUT:-out}/build_variant3.log 2>&1; echo "variant3 build rc=$?" >> ${OUT:-out}/build_variant3.log) &
export BUILD_ARGS="--family attention" MAX_JOBS=8
source dev/gpu_call_lib.sh
wait; tail -1 $O/build_variant3.log; echo "both builds at $((SECONDS - t0)) s"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(cd .variant3 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 60) $cs --tool memcheck --error-exitcode 9 python bench/sanitize_attention.py \
  --paths hopper --batch 1 --heads 140 --seqlens 129,300,700 --head-dims 64 --dtypes bf16 > $O/san_mem.log 2>&1)
echo "== memcheck rc=$? $(grep 'ERROR SUMMARY' $O/san_mem.log)"
(cd .variant3 && step tests 200 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf \
  tests/attention/test_attention_gpu.py tests/attention/test_attention_dropout_gpu.py tests/attention/test_attention_qkv_gpu.py)
tail -1 $O/tests.log; grep -E "^FAILED|^ERROR" $O/tests.log | head -10
S="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
step bench_main 45 python bench/bench_attention.py --graphs --causal true --impls tk,cudnn --shapes "$S" --json $O/bench_main.json
(cd .variant3 && step bench_dyn 45 python bench/bench_attention.py --graphs --causal true --impls tk,cudnn --shapes "$S" --json $O/bench_dyn.json)
step bench_main2 45 python bench/bench_attention.py --graphs --causal true --impls tk,cudnn --shapes "$S" --json $O/bench_main2.json
grep -E "fwd" $O/bench_main.log | head -4; echo "-- dynamic walks"; grep -E "fwd" $O/bench_dyn.log | head -4; echo "-- main again"; grep -E "fwd" $O/bench_main2.log | head -4
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
