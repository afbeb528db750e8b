#!/usr/bin/env bash
# Session 17, third GPU call (issues 8, 9, 12). Trees:
#   main     = working tree: the causal D = 64 backward's dynamic walk, the causal D = 64 forward's dynamic walk from
#              T = 1024 on (hopper_fwd_dynamic_walk), the D = 64 forward's ping-pong turn carried across items
#   .variant = main with the forward's counter at every T (s17b: -5% at causal (64,6,256,64), the zero-fill?)
# Prep: mkdir .variant && git ls-files -z | xargs -0 tar c | tar x -C .variant, copy the changed files, then make
#   hopper_fwd_dynamic_walk return `causal && D == 64`. Carry [".gpu_data", ".variant"].
# Also: does racecheck model mbarrier arrive / wait (dev/racecheck_mbarrier_handoff.cu, with two controls)?
mkdir -p ${OUT:-out}
ext=$PWD/build/torch_extensions
(cd .variant && MAX_JOBS=4 TORCH_EXTENSIONS_DIR=$ext PYTHONPYCACHEPREFIX=/tmp/pyc python -m tk_kernels.build --family attention \
  > ${OUT:-out}/build.variant.log 2>&1; echo ".variant build rc=$?" >> ${OUT:-out}/build.variant.log) &
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -I tk_kernels/include dev/racecheck_mbarrier_handoff.cu -o /tmp/handoff \
  && for m in mbarrier syncthreads none; do $cs --tool racecheck /tmp/handoff $m; done > ${OUT:-out}/handoff.log 2>&1) &
export MAX_JOBS=12
source dev/gpu_call_lib.sh
wait; tail -qn1 $O/build.variant.log; echo "all builds at $((SECONDS - t0)) s"
grep -E "^(mbarrier|syncthreads|none):|RACECHECK SUMMARY" $O/handoff.log
step tests_main 300 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/attention/test_attention_gpu.py \
  tests/attention/test_attention_qkv_gpu.py tests/attention/test_attention_dropout_gpu.py tests/attention/test_attention_hopper_bwd_gpu.py &
(PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 250) $cs --tool memcheck --error-exitcode 9 python bench/sanitize_attention.py \
  --paths hopper --batch 1 --heads 140 --seqlens 300,1100 --head-dims 64 --dtypes bf16 > $O/san_mem.log 2>&1
 echo "== memcheck rc=$? $(grep 'ERROR SUMMARY' $O/san_mem.log)") &
(PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 250) $cs --tool racecheck --error-exitcode 9 python bench/sanitize_attention.py \
  --paths hopper --batch 1 --heads 24 --seqlens 1100 --head-dims 64 --dtypes bf16 > $O/san_race.log 2>&1
 echo "== racecheck rc=$? $(grep 'RACECHECK SUMMARY' $O/san_race.log)"
 echo "hazard sites other than the item records:"; grep -A1 "Race reported" $O/san_race.log | grep -oE "producer_consumer.cuh:[0-9]+|[a-z_]+\.cu[h]?:[0-9]+" | sort | uniq -c) &
wait; echo "correctness done at $((SECONDS - t0)) s"; tail -1 $O/tests_main.log; grep -E "^FAILED|^ERROR" $O/tests_main.log | head -10
S="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64;32,12,512,64;8,16,2048,128"
step bench_main 60 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench_main.json
(cd .variant && step bench_always 60 python bench/bench_attention.py --graphs --impls tk,cudnn --causal true --shapes "$S" --json $O/bench_always.json)
step bench_main2 60 python bench/bench_attention.py --graphs --impls tk,cudnn --causal true --shapes "$S" --json $O/bench_main2.json
for n in main always main2; do echo "-- $n"; grep -E "causal=" $O/bench_$n.log | head -12; done; grep -E "^ +\(" $O/bench_main.log | head -24
step train 200 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train
tail -6 $O/train.log
step drop 60 python bench/bench_attention_dropout.py --graphs --impls tk,cudnn,flash --json $O/drop.json
tail -9 $O/drop.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json train 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
