#!/usr/bin/env bash
# Prepared in session 22 (no device time left): the MLP GEMMs as 2-CTA clusters that multicast their common B tile
# (dev/patches/mlp_gemm_cluster_pairs.patch), never run on a GPU. Session 22's stall samples put the GELU' GEMM's
# consumers on ring full barriers ~44% of their time, and its L2 traffic (operands by TMA + gelu' + dh, ~7.5 TB/s) at
# the plain GEMM's; pairs of CTAs on tiles (2m, n), (2m + 1, n) each load half of B into both: 28 KB a slice a CTA
# instead of 40 (GELU kernels), 32 instead of 48 (plain).
#   main = HEAD;  .vcl = HEAD + dev/patches/mlp_gemm_cluster_pairs.patch
# Prep: rm -rf .vcl && mkdir .vcl && git archive HEAD | tar -x -C .vcl && (cd .vcl && patch -p1 < ../dev/patches/mlp_gemm_cluster_pairs.patch)
# Carry [".gpu_data", ".vcl"]. The first .vcl run has 40 s: a hang in the cluster protocol shows as its timeout.
export MAX_JOBS=8 VARIANTS=".vcl" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step save_main 40 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_main.pt
(cd .vcl && step save_vcl 40 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_vcl.pt) || { echo "SMOKE FAILED"; tail -5 $O/save_vcl.log; }
echo "-- vcl vs main (all bitwise: the same products in the same order):"; python dev/compare_saved.py $O/saved_main.pt $O/saved_vcl.pt
# main's own (session 22 merged .v192sd, whose tests/mlp stopped at the compiled GPT step: only the MLP family was built)
step tests_main 200 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/model &
(cd .vcl && step tests 200 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/model) &
san .vcl vcl memcheck racecheck synccheck
wait; echo "correctness done at $((SECONDS - t0)) s"; echo "tests main: $(tail -1 $O/tests_main.log)"; grep -E "^FAILED|^ERROR" $O/tests_main.log | head
echo "tests vcl: $(tail -1 $O/tests.log)"; grep -E "^FAILED|^ERROR" $O/tests.log | head
epi . main; epi .vcl vcl; epi . main2; epi .vcl vcl_2
step train_main 130 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train_main
tail -3 $O/train_main.log
(cd .vcl && step train_vcl 80 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train_vcl); tail -2 $O/train_vcl.log | head -1
step mlp_main 90 python bench/bench_mlp.py --json $O/mlp_main.json; tail -16 $O/mlp_main.log
(cd .vcl && step mlp_vcl 90 python bench/bench_mlp.py --json $O/mlp_vcl.json); tail -16 $O/mlp_vcl.log
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json train_* 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
