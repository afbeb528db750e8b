#!/usr/bin/env bash
# Session 22, second call: the epilogue-warpgroup GELU GEMMs (s22a: GELU 173 -> 167 us, GELU' 197 -> 193 us, GPT-2
# step 31.85 -> 31.64 ms on an H200; racecheck reported 11 hazards on the hand-off) with the hand-off fixed, and two
# changes on top of it:
#   main    = HEAD
#   .v192   = HEAD + dev/patches/mlp_epilogue_warpgroup.patch + every epilogue thread arrives on the empty / bias0
#             barriers (count 128) for its own writes: the racecheck fix
#   .v192st = .v192 + stmatrix staging (12 stmatrix.x4 a consumer thread instead of 48 32-bit stores): bitwise = .v192
#   .v192d  = .v192 + the forward's GELU epilogue writes gelu'(pre) (not pre) and the GELU' epilogue multiplies by it:
#             no erf in the backward, no pre-activation TMA stores (and no waits on them) in the forward
# Prep: the trees are in the working copy (dev/patches/s22b_*.patch regenerate them). Carry [".gpu_data", ".v192",
#   ".v192st", ".v192d"].
export MAX_JOBS=6 VARIANTS=".v192 .v192st .v192d" VARIANT_JOBS=4 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step save_main 40 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_main.pt
for t in v192 v192st v192d; do (cd .$t && step save_$t 60 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_$t.pt); done
echo "-- v192 vs main (sums: another order):"; python dev/compare_saved.py $O/saved_main.pt $O/saved_v192.pt
echo "-- v192st vs v192 (all bitwise):"; python dev/compare_saved.py $O/saved_v192.pt $O/saved_v192st.pt
echo "-- v192d vs main (gelu and the stores bitwise; 'pre' is gelu'(pre) now, dgelu differs):"
python dev/compare_saved.py $O/saved_main.pt $O/saved_v192d.pt
for t in v192 v192st v192d; do (cd .$t && step tests_$t 150 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/model) & done
SAN_SECS=170 san .v192 v192 racecheck; san .v192st v192st racecheck memcheck; san .v192d v192d racecheck memcheck synccheck
wait; echo "correctness done at $((SECONDS - t0)) s"
for t in v192 v192st v192d; do echo "tests $t: $(tail -1 $O/tests_$t.log)"; grep -E "^FAILED|^ERROR" $O/tests_$t.log | head -5; done
epi . main; epi .v192 v192; epi .v192st v192st; epi .v192d v192d
epi . main2; epi .v192 v192_2; epi .v192st v192st_2; epi .v192d v192d_2
step train_main 130 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train_main
tail -3 $O/train_main.log
for t in v192d v192st v192; do (cd .$t && step train_$t 80 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train_$t); tail -2 $O/train_$t.log | head -1; done
for k in 8:gelu 10:dgelu; do  # launch 8: the GELU GEMM, 10: the GELU' one (dev/mlp_epilogue_ncu.py's order)
  (cd .v192d && step ncu_${k#*:} 40 ncu --clock-control none -k regex:gemm_kernel --launch-skip ${k%:*} -c 1 --section SourceCounters \
     --section WarpStateStats --import-source no -f -o $O/r_${k#*:} python dev/mlp_epilogue_ncu.py --ncu)
  ncu -i $O/r_${k#*:}.ncu-rep --page source --csv --print-source sass > $O/src_v192d_${k#*:}.csv 2>> $O/ncu_export.log
  python dev/ncu_stalls.py $O/src_v192d_${k#*:}.csv --top 12 2>&1 | sed -n 2,8p | cut -c1-150
done; rm -f $O/*.ncu-rep
step train_main2 80 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train_main2
tail -2 $O/train_main2.log | head -1
(cd .v192d && step mlp_v192d 90 python bench/bench_mlp.py --skip-gemm --json $O/mlp_v192d.json); tail -6 $O/mlp_v192d.log
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.txt *.csv *.json train_* 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
