#!/usr/bin/env bash
# Prepared in session 20 (after its device budget was spent): the MLP GELU GEMMs' staging by stmatrix, and where the
# GELU kernel's remaining time over the plain store goes (Nsight Compute's per-instruction stall samples).
#   main   = HEAD (the GELU staging loads the tile's bias with all 32 loads in flight: 180 -> 170 us on an H100)
#   .vstsm = HEAD + dev/patches/mlp_stage_stmatrix.patch (stage_tile: 16 stmatrix.x4 a thread instead of 64
#            32-bit stores; GELU 2776 -> 2736, GELU' 3512 -> 3464 SASS instructions; 168 registers, no spills;
#            bitwise the same values by construction, checked here)
# Prep (CPU machine): rm -rf .vstsm && mkdir .vstsm && git archive HEAD | tar -x -C .vstsm &&
#   git apply --directory=.vstsm dev/patches/mlp_stage_stmatrix.patch
# Carry [".gpu_data", ".vstsm"]. Merge the patch if its outputs are bitwise main's, the tests and sanitizers pass and
# the GELU / GELU' GEMMs are faster; keep the stall table for the next lead either way.
export MAX_JOBS=10 VARIANTS=".vstsm" VARIANT_JOBS=6 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# 1. bitwise against main (random bias, N = 2000: ragged, CTAs take two tiles)
step save_main 40 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_main.pt
(cd .vstsm && step save_stsm 40 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_stsm.pt)
python dev/compare_saved.py $O/saved_main.pt $O/saved_stsm.pt
# 2. tests and sanitizers on the patch
(cd .vstsm && step tests 170 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/model) &
for tool in memcheck racecheck; do
  (cd .vstsm && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 150) $cs --tool $tool --error-exitcode 9 python \
     dev/mlp_epilogue_ncu.py --ncu --small --sums > $O/san_$tool.log 2>&1
   echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_$tool.log)") &
done
wait; echo "correctness done at $((SECONDS - t0)) s"; echo "tests: $(tail -1 $O/tests.log)"; grep -E "^FAILED|^ERROR" $O/tests.log | head
# 3. the GEMMs alone, A/B/A/B
e() { (cd $1 && step epi_$2 30 python dev/mlp_epilogue_ncu.py); echo "-- $2"; grep TFLOP $O/epi_$2.log; }
e . main; e .vstsm stsm; e . main2; e .vstsm stsm2
# 4. where main's GELU kernel waits: stall samples per SASS instruction (launch 8 = the GELU GEMM after the warm-up)
step ncu_gelu 120 ncu --clock-control none -k regex:gemm_kernel --launch-skip 8 -c 1 --section SourceCounters \
  --section WarpStateStats --import-source no -f -o $O/gelu_src python dev/mlp_epilogue_ncu.py --ncu
ncu -i $O/gelu_src.ncu-rep --page source --csv --print-source sass > $O/gelu_src_sass.csv 2> $O/ncu_export.log
python - "$O/gelu_src_sass.csv" <<'EOF' > $O/gelu_stalls_top.txt 2>&1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
key = next((k for k in rows[0] if "Warp Stall Sampling (All" in k), None) if rows else None
print("columns:", list(rows[0])[:12] if rows else "none")
if key:
    tot = sum(float(r[key] or 0) for r in rows)
    for r in sorted(rows, key=lambda r: -float(r[key] or 0))[:40]:
        print(f"{float(r[key] or 0) / max(tot, 1):6.1%}  {r.get('Address', '')}  {r.get('Source', '')[:90]}")
EOF
head -45 $O/gelu_stalls_top.txt
# 5. the GPT-2 step
step train_main 130 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train_main
tail -4 $O/train_main.log
(cd .vstsm && step train_stsm 120 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train_stsm)
tail -3 $O/train_stsm.log
echo "all done at $((SECONDS - t0)) s"
rm -f $O/gelu_src.ncu-rep
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.txt *.csv train_* 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
