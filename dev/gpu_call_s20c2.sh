#!/usr/bin/env bash
# Session 20, second call: the GELU GEMM's bias loads. SASS of the shipped GELU kernel showed finish()'s staging
# loading the tile's bias as 32 dependent global round trips (each load in its own branch, used at once), while the
# tensor pipe waits between tiles; session 14's gelu_identity_nostage put finish()'s staging at ~0.03 ms of the
# GELU GEMM's 0.058 ms over the plain store.
#   .vbase = HEAD (before the fix)
#   main   = the working tree: stage_tile loads the whole tile's bias first (tile_bias: 32 loads in flight)
#   .vphi  = main + dev/patches/gelu_logistic_phi.patch (Phi as a logistic function of a degree-9 polynomial)
# Prep (CPU machine): rm -rf .vbase .vphi && mkdir .vbase .vphi && git archive HEAD | tar -x -C .vbase &&
#   git archive HEAD | tar -x -C .vphi && git diff HEAD -- tk_kernels dev/mlp_epilogue_ncu.py dev/compare_saved.py |
#   git apply --directory=.vphi && git apply --directory=.vphi dev/patches/gelu_logistic_phi.patch &&
#   cp dev/mlp_epilogue_ncu.py dev/compare_saved.py .vbase/dev/
# Carry [".gpu_data", ".vbase", ".vphi"].
export MAX_JOBS=8 VARIANTS=".vbase .vphi" VARIANT_JOBS=4 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# 1. the fix changes no result: bitwise against the base tree (random bias, N = 2000: ragged, CTAs take two tiles)
for t in .vbase . .vphi; do (cd $t && step save${t#.} 40 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved${t#.}.pt); done
python dev/compare_saved.py $O/savedvbase.pt $O/saved.pt
# 2. tests and sanitizers
(step tests 150 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/model) &
(cd .vphi && step tests_phi 150 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp) &
for tool in memcheck racecheck; do
  (PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 150) $cs --tool $tool --error-exitcode 9 python \
     dev/mlp_epilogue_ncu.py --ncu --small --sums > $O/san_$tool.log 2>&1
   echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_$tool.log)") &
done
wait; echo "correctness done at $((SECONDS - t0)) s"
echo "tests: $(tail -1 $O/tests.log)"; grep -E "^FAILED|^ERROR" $O/tests.log | head; echo "tests_phi: $(tail -1 $O/tests_phi.log)"
# 3. the GEMMs alone, A/B/C/A/B/C
e() { (cd $1 && step epi_$2 30 python dev/mlp_epilogue_ncu.py); echo "-- $2"; grep TFLOP $O/epi_$2.log; }
e .vbase base; e . bias; e .vphi phi; e .vbase base2; e . bias2; e .vphi phi2
# 4. the GPT-2 step
step train_main 130 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train_main
tail -4 $O/train_main.log
(cd .vbase && step train_base 90 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train_base); tail -3 $O/train_base.log
(cd .vphi && step train_phi 90 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train_phi); tail -3 $O/train_phi.log
step train_main2 90 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train_main2; tail -3 $O/train_main2.log
# 5. MLP fwd+bwd (issue 11's benchmark)
step mlp_main 60 python bench/bench_mlp.py --skip-gemm --json $O/mlp_main.json; tail -6 $O/mlp_main.log
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json train_* 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
