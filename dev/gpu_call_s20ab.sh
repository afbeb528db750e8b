#!/usr/bin/env bash
# Session 20: device starts were refused for ~20 minutes, so gpu_call_s20a.sh and s20b.sh (about 10 min each) no
# longer both fit what was left of the device budget. This call measures the one tree that carries both prepared
# ideas, in priority order, each step under its own timeout:
#   main      = HEAD
#   .variant4 = HEAD + dev/patches/mlp_epilogue_warps.patch + attention_fwd_bit_warps.patch + attention_bwd_bit_warps.patch
#               (prep: gpu_call_s20b.sh's header). At dropout 0 only the MLP epilogue warps differ from main (every
#               p = 0 attention instance's SASS is unchanged), so the GPT-2 step isolates the MLP change and the
#               dropout benchmark isolates the bit warps.
# Carry [".gpu_data", ".variant4"].
export MAX_JOBS=10 VARIANTS=".variant4" VARIANT_JOBS=6 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
# 1. smoke runs of the never-run code (a hang costs 45 s, not the call)
(cd .variant4 && step smoke_mlp 45 python dev/mlp_epilogue_ncu.py --small --sums); mlp_ok=$?
(cd .variant4 && step smoke_att 45 python bench/sanitize_attention.py --paths hopper --batch 1 --heads 24 \
   --seqlens 300,1100 --head-dims 64 --dtypes bf16 --dropout 0.2); att_ok=$?
echo "smoke mlp rc=$mlp_ok attention rc=$att_ok"; tail -3 $O/smoke_att.log
[ $mlp_ok != 0 ] && [ $att_ok != 0 ] && { echo "neither runs: stopping"; cd $O && tar czf logs.tgz *.log; exit 0; }
# 2. correctness, all at once (one GPU, small problems)
A="tests/attention/test_attention_dropout_gpu.py tests/attention/test_attention_hopper_bwd_gpu.py"
(cd .variant4 && step tests 200 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/model $A) &
san() {  # name tool cmd...
  local n=$1 t=$2; shift 2
  (cd .variant4 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 200) $cs --tool $t --error-exitcode 9 "$@" > $O/san_$n.log 2>&1
   echo "== san $n rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_$n.log | tr '\n' ' ')")
}
SA="python bench/sanitize_attention.py --paths hopper --batch 1 --heads 24 --seqlens 300,1100 --head-dims 64 --dtypes bf16 --dropout 0.2"
san mlp_mem memcheck python dev/mlp_epilogue_ncu.py --ncu --small --sums &
san mlp_race racecheck python dev/mlp_epilogue_ncu.py --ncu --small --sums &
san att_race racecheck $SA &
san att_sync synccheck $SA &
wait; echo "correctness done at $((SECONDS - t0)) s"
echo "tests: $(tail -1 $O/tests.log)"; grep -E "^FAILED|^ERROR" $O/tests.log | head -10
# 3. the MLP GEMM epilogues, A/B/A (do_bench medians, (16384, 3072, 768))
e() { (cd $1 && step epi_$2 35 python dev/mlp_epilogue_ncu.py); echo "-- $2"; grep TFLOP $O/epi_$2.log; }
e . main; e .variant4 helpers; e . main2
# 4. dropout overhead, A/B (CUDA-graph replays)
b() { (cd $1 && step drop_$2 60 python bench/bench_attention_dropout.py --graphs --impls tk,cudnn --json $O/drop_$2.json)
      echo "-- $2"; tail -6 $O/drop_$2.log; }
b . main; b .variant4 bits
# 5. the GPT-2 step (dropout 0: the MLP epilogue warps only)
step train_main 130 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train_main
tail -4 $O/train_main.log
(cd .variant4 && step train_v4 100 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train_v4)
tail -3 $O/train_v4.log
b . main2; b .variant4 bits2
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json train_main train_v4 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
