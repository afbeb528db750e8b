#!/usr/bin/env bash
# Prepared in session 21 (its device time ran out): the GELU / GELU' GEMMs on an epilogue warpgroup, full check.
#   main   = HEAD
#   .v192  = HEAD + dev/patches/mlp_epilogue_warpgroup.patch (see gpu_call_s21f.sh, the 3-minute version of this)
#   .v192g = HEAD + dev/patches/mlp_epilogue_warpgroup_gelu_only.patch (GELU only; GELU' is main's kernel): bitwise and
#            timed beside the others, so that a GELU-only merge needs no further call
# Prep: rm -rf .v192 && mkdir .v192 && git archive HEAD | tar -x -C .v192 && (cd .v192 && patch -p1 < ../dev/patches/mlp_epilogue_warpgroup.patch) &&
#   rm -rf .v192g && mkdir .v192g && git archive HEAD | tar -x -C .v192g && (cd .v192g && patch -p1 < ../dev/patches/mlp_epilogue_warpgroup_gelu_only.patch)
# Carry [".gpu_data", ".v192", ".v192g"]. The first run of .v192 has 60 s (a hang in the hand-off shows as its timeout).
export MAX_JOBS=6 VARIANTS=".v192 .v192g" VARIANT_JOBS=5 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step save_main 40 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_main.pt
(cd .v192 && step save_v192 60 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_v192.pt) || { echo "SMOKE FAILED"; tail -5 $O/save_v192.log; }
echo "-- v192 vs main (the column sums add in another order: equal to rounding, not bitwise):"
python dev/compare_saved.py $O/saved_main.pt $O/saved_v192.pt
(cd .v192g && step save_v192g 40 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_v192g.pt)
echo "-- v192g vs main (all bitwise):"; python dev/compare_saved.py $O/saved_main.pt $O/saved_v192g.pt
(cd .v192 && step tests 200 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/model) &
san .v192 v192 memcheck racecheck synccheck
wait; echo "correctness done at $((SECONDS - t0)) s"; echo "tests: $(tail -1 $O/tests.log)"; grep -E "^FAILED|^ERROR" $O/tests.log | head
epi . main; epi .v192 v192; epi .v192g v192g; epi . main2; epi .v192 v192_2; epi .v192g v192g_2
(cd .v192 && step ncu_gelu 60 ncu --clock-control none -k regex:gemm_kernel --launch-skip 8 -c 1 --section SourceCounters \
   --section WarpStateStats --import-source no -f -o $O/r_gelu python dev/mlp_epilogue_ncu.py --ncu)
ncu -i $O/r_gelu.ncu-rep --page source --csv --print-source sass > $O/src_v192_gelu.csv 2>> $O/ncu_export.log
python dev/ncu_stalls.py $O/src_v192_gelu.csv --top 15 > $O/stalls_v192_gelu.txt 2>&1; head -10 $O/stalls_v192_gelu.txt | cut -c1-160
rm -f $O/*.ncu-rep
step train_main 130 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train_main
tail -3 $O/train_main.log
(cd .v192 && step train_v192 100 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train_v192)
tail -2 $O/train_v192.log
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.txt *.csv train_* 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
