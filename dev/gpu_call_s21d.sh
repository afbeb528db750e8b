#!/usr/bin/env bash
# Session 21, call 2: s21b's stall samples put 36% of a GELU GEMM variant's warp samples on its consumers waiting for
# a ring slot's TMA data (the IN_FLIGHT = 2 variant, 230 us: it freed each slot a piece later). Main frees slot i - 1
# after piece i, so slot i + 2's load starts one piece before it is needed, in a 3-stage ring (the plain store has 4).
#   main    = HEAD
#   .vrb    = HEAD + dev/patches/pipeline_retire_before_piece.patch with EARLY = !UNROLL (the GELU / GELU' kernels
#             retire slot i - 1 right after issuing slot i, before the piece: two pieces of lead for each load)
#   .vrball = the same for every piece loop (EARLY = true: the plain store too)
#   .vh4    = HEAD + dev/patches/mlp_gelu_half_staged.patch: the GELU kernel stages half its tile (boxes 0, 1; boxes 2, 3
#             wait in 32 registers and are staged in pieces 3 and 5 into the buffers boxes 0, 1's output stores freed),
#             so 2 x 16 KB of staging instead of 2 x 32 KB and a 4-stage ring (GELU' unchanged)
# Prep: for v in vrb vrball; do rm -rf .$v && mkdir .$v && git archive HEAD | tar -x -C .$v &&
#   (cd .$v && patch -p1 < ../dev/patches/pipeline_retire_before_piece.patch); done && sed -i 's/EARLY = !UNROLL/EARLY = true/'
#   .vrball/tk_kernels/include/pipeline/producer_consumer.cuh
#   mkdir .vh4 && git archive HEAD | tar -x -C .vh4 && (cd .vh4 && patch -p1 < ../dev/patches/mlp_gelu_half_staged.patch)
# (.vrball was dropped from the call when device time ran short.) Carry [".gpu_data", ".vrb", ".vh4"].
export LIMIT=${LIMIT:-470} MAX_JOBS=8 VARIANTS=".vrb .vh4" VARIANT_JOBS=4 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step save_main 40 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_main.pt
for v in rb h4; do
  (cd .v$v && step save_$v 40 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_$v.pt)
  echo "-- $v vs main:"; python dev/compare_saved.py $O/saved_main.pt $O/saved_$v.pt | tail -1
done
for v in rb h4; do
  (cd .v$v && step tests_$v 150 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/model) &
  for tool in memcheck racecheck; do
    (cd .v$v && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 150) $cs --tool $tool --error-exitcode 9 python \
       dev/mlp_epilogue_ncu.py --ncu --small --sums > $O/san_${tool}_$v.log 2>&1
     echo "== $tool $v rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_${tool}_$v.log)") &
  done
done
wait; echo "correctness done at $((SECONDS - t0)) s"
for v in rb h4; do echo "tests $v: $(tail -1 $O/tests_$v.log)"; grep -E "^FAILED|^ERROR" $O/tests_$v.log | head; done
e() { (cd $1 && step epi_$2 30 python dev/mlp_epilogue_ncu.py); echo "-- $2"; grep TFLOP $O/epi_$2.log; }
e . main; e .vrb rb; e .vh4 h4; e . main2; e .vrb rb2; e .vh4 h4_2
# stall samples of the GELU (launch 8) and GELU' (launch 10) GEMMs, main and .vrb
for t in main:. rb:.vrb h4:.vh4; do
  for k in 8:gelu 10:dgelu; do
    [ ${t%%:*} = h4 ] && [ ${k#*:} = dgelu ] && continue
    (cd ${t#*:} && step ncu_${t%%:*}_${k#*:} 60 ncu --clock-control none -k regex:gemm_kernel --launch-skip ${k%%:*} -c 1 \
       --section SourceCounters --section WarpStateStats --import-source no -f -o $O/r_${t%%:*}_${k#*:} python dev/mlp_epilogue_ncu.py --ncu)
    ncu -i $O/r_${t%%:*}_${k#*:}.ncu-rep --page source --csv --print-source sass > $O/src_${t%%:*}_${k#*:}.csv 2>> $O/ncu_export.log
    python dev/ncu_stalls.py $O/src_${t%%:*}_${k#*:}.csv --top 12 > $O/stalls_${t%%:*}_${k#*:}.txt 2>&1
    echo "-- stalls ${t%%:*} ${k#*:}"; head -8 $O/stalls_${t%%:*}_${k#*:}.txt | cut -c1-160
  done
done
rm -f $O/*.ncu-rep
step train_main 130 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train_main
tail -3 $O/train_main.log
for v in h4; do
  (cd .v$v && step train_$v 100 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train_$v)
  tail -2 $O/train_$v.log
done
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.txt *.csv train_* 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
