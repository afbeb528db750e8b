#!/usr/bin/env bash
# Session 17, fourth GPU call (issue 8): the DYNAMIC hand-off with its own record barriers (every consumer thread
# arrives on a record's empty barrier after reading it; s17c: racecheck reported 28 hazards between the consumers'
# record reads and the producer's record writes when the records rode on the item buffer's barriers, whose empty
# side only the consumers' leaders arrive on; dev/racecheck_mbarrier_handoff.cu showed racecheck does model
# mbarrier arrive / wait). Checks: racecheck, memcheck, the attention GPU tests, the D = 64 benchmark.
export LIMIT=240 BUILD_ARGS="--family attention"
source dev/gpu_call_lib.sh
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step tests 150 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/attention/test_attention_gpu.py \
  tests/attention/test_attention_qkv_gpu.py tests/attention/test_attention_dropout_gpu.py tests/attention/test_attention_hopper_bwd_gpu.py &
(PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 150) $cs --tool memcheck --error-exitcode 9 python bench/sanitize_attention.py \
  --paths hopper --batch 1 --heads 140 --seqlens 300,1100 --head-dims 64 --dtypes bf16 > $O/san_mem.log 2>&1
 echo "== memcheck rc=$? $(grep 'ERROR SUMMARY' $O/san_mem.log)") &
(PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 160) $cs --tool racecheck --error-exitcode 9 python bench/sanitize_attention.py \
  --paths hopper --batch 1 --heads 24 --seqlens 300,1100 --head-dims 64 --dtypes bf16 > $O/san_race.log 2>&1
 echo "== racecheck rc=$? $(grep 'RACECHECK SUMMARY' $O/san_race.log)"
 grep -A1 "Race reported" $O/san_race.log | grep -oE "[a-z_]+\.cuh?:[0-9]+" | sort | uniq -c) &
wait; echo "correctness done at $((SECONDS - t0)) s"; tail -1 $O/tests.log; grep -E "^FAILED|^ERROR" $O/tests.log | head -10
S="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64;32,12,512,64"
step bench 40 python bench/bench_attention.py --graphs --impls tk,cudnn --shapes "$S" --json $O/bench.json
grep -E "^ +\(" $O/bench.log | head -20
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
