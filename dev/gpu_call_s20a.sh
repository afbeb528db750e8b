#!/usr/bin/env bash
# Prepared in session 19 (the GPU was lent for two calls, then paused): the MLP GEMM's GELU / GELU' epilogues
# moved off the consumers onto the producer warpgroup's idle warps 1 .. 3, compiled and SASS-checked on the CPU
# machine only, never run.
#   main      = HEAD (the epilogue pieces run by the consumers between one K slice's wgmmas and the next)
#   .variant  = HEAD + dev/patches/mlp_epilogue_warps.patch (tk::pipeline's P::helper; the consumers stage a
#               finished tile and hand it to the helpers through two mbarriers per consumer; producer warpgroup
#               72 registers, consumers 216, 0 spills)
#   .variant2 = .variant + dev/patches/gelu_logistic_phi.patch (Phi as a logistic function of a degree-9 odd
#               polynomial: the erf-GELU chunk loop 151 -> 102 SASS instructions per 8 values)
# Prep (CPU machine):
#   rm -rf .variant .variant2 && mkdir .variant .variant2 && git archive HEAD | tar -x -C .variant && \
#   git archive HEAD | tar -x -C .variant2 && git apply --directory=.variant dev/patches/mlp_epilogue_warps.patch && \
#   git apply --directory=.variant2 dev/patches/mlp_epilogue_warps.patch && \
#   git apply --directory=.variant2 dev/patches/gelu_logistic_phi.patch
# Carry [".gpu_data", ".variant", ".variant2"]. Merge a variant if its tests pass, the sanitizers are clean and the
# GELU GEMMs and the GPT-2 step are faster; then fill in the "Measured" lines of the patches' comments.
export MAX_JOBS=8 VARIANTS=".variant .variant2" VARIANT_JOBS=4 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# smoke first (the hand-off has never run: a hang here costs 45 s, not the whole call)
(cd .variant && step smoke.variant 45 python dev/mlp_epilogue_ncu.py --small --sums)
if [ $? != 0 ]; then echo "the epilogue warps do not run: stopping"; tail -5 $O/smoke.variant.log; cd $O && tar czf logs.tgz *.log; exit 0; fi
for v in .variant .variant2; do
  (cd $v && step tests$v 240 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/model) &
done
san() {  # tree tool: the four GEMMs of dev/mlp_epilogue_ncu.py at N = 2000 with the column sums (CTAs take a
         # second tile, whose hand-off reuses the buffers; a ragged last tile)
  (cd $1 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 240) $cs --tool $2 --error-exitcode 9 python \
     dev/mlp_epilogue_ncu.py --ncu --small --sums > $O/san_$2$1.log 2>&1
   echo "== $2 $1 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_$2$1.log)")
}
san .variant memcheck & san .variant racecheck & san .variant synccheck & san .variant2 racecheck &
wait; echo "correctness done at $((SECONDS - t0)) s"
for v in .variant .variant2; do echo "tests$v: $(tail -1 $O/tests$v.log)"; grep -E "^FAILED|^ERROR" $O/tests$v.log | head -10; done
e() { (cd $1 && step epi_$2 40 python dev/mlp_epilogue_ncu.py); echo "-- $2"; grep TFLOP $O/epi_$2.log; }
e . main; e .variant helpers; e .variant2 logistic; e . main2; e .variant helpers2; e .variant2 logistic2
m() { (cd $1 && step mlp_$2 60 python bench/bench_mlp.py --skip-gemm --json $O/mlp_$2.json); echo "-- $2"; tail -5 $O/mlp_$2.log; }
m . main; m .variant helpers; m . main2; m .variant helpers2   # issue 11's benchmark (noisy in s19a: A/B/A/B)
step train_main 120 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train_main
tail -4 $O/train_main.log
for v in .variant .variant2; do
  (cd $v && step train$v 90 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train$v)
  tail -3 $O/train$v.log
done
(cd .variant && step profile_helpers 90 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --profile \
   --top 30 --out $O/profile_helpers); grep -iE "gemm|gelu|total" $O/profile_helpers.log | head -20
(cd .variant && step ncu_helpers 90 ncu --clock-control none -k regex:gemm_kernel --launch-skip 8 -c 4 --section SpeedOfLight \
    --section WarpStateStats --section SchedulerStats --metrics "smsp__inst_executed.sum" python dev/mlp_epilogue_ncu.py --ncu)
grep -E "gemm_kernel<|Duration|Issue Slots|Eligible Warps|Compute \(SM\)|inst_executed.sum" $O/ncu_helpers.log | cut -c1-120
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json train_main train.variant train.variant2 profile_helpers 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
