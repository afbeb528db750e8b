#!/usr/bin/env bash
# Session 21, call 1 of 2: the MLP GELU GEMMs' staging, two candidates beside main (correctness, then A/B timings).
#   main    = HEAD
#   .vstsm  = HEAD + dev/patches/mlp_stage_stmatrix.patch (stage_tile by stmatrix.x4: 16 stores a thread instead of 64)
#   .vdefer = HEAD + dev/patches/mlp_stage_deferred.patch (the GELU / GELU' finish rounds the tile into 64 pending
#             registers, as the plain store does, and the next tile's first slice is issued before the tile is
#             written to shared memory, by a new first deferred piece; the pipeline peels piece 0 of rolled piece
#             loops so that the GELU' kernel's pre-activation registers are not live across it: spill-free)
#   .vdp    = .vdefer + dev/patches/mlp_piece_loads_first.patch (a piece reads both of its 16-byte chunks before
#             computing either: SASS showed chunk 2's load waiting for chunk 1's store, 8 values in flight, not 16)
#   .vif2   = .vdp + dev/patches/mlp_two_in_flight.patch (the pipeline's consumer::IN_FLIGHT: the GELU kernels' retire()
#             waits for all but the newest two wgmma groups and the template frees slot i - 2, so a piece runs with
#             two slices queued on the tensor pipe instead of one or two)
# Prep (CPU machine): for v in vstsm vdefer vdp; do rm -rf .$v && mkdir .$v && git archive HEAD | tar -x -C .$v; done &&
#   (cd .vstsm && patch -p1 < ../dev/patches/mlp_stage_stmatrix.patch) && (cd .vdefer && patch -p1 < ../dev/patches/mlp_stage_deferred.patch)
#   && (cd .vdp && patch -p1 < ../dev/patches/mlp_stage_deferred.patch && patch -p1 < ../dev/patches/mlp_piece_loads_first.patch)
#   && cp -r .vdp .vif2 && (cd .vif2 && patch -p1 < ../dev/patches/mlp_two_in_flight.patch)
# (.vstsm is not run in this call: the deferred staging takes the staging off the tile boundary.)
# Carry [".gpu_data", ".vdefer", ".vdp", ".vif2"]. Then gpu_call_s21c.sh on the warm machine (GPT-2 step, stall samples).
export MAX_JOBS=7 VARIANTS=".vdefer .vdp .vif2" VARIANT_JOBS=3 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv,noheader
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# 1. bitwise against main (random bias, N = 2000: ragged, CTAs take two tiles)
step save_main 40 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_main.pt
for v in defer dp if2; do
  (cd .v$v && step save_$v 40 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_$v.pt)
  echo "-- $v vs main:"; python dev/compare_saved.py $O/saved_main.pt $O/saved_$v.pt
done
# 2. tests and sanitizers on all three changes (.vif2)
(cd .vif2 && step tests 190 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/model) &
for tool in memcheck racecheck; do
  (cd .vif2 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 170) $cs --tool $tool --error-exitcode 9 python \
     dev/mlp_epilogue_ncu.py --ncu --small --sums > $O/san_$tool.log 2>&1
   echo "== $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_$tool.log)") &
done
wait; echo "correctness done at $((SECONDS - t0)) s"; echo "tests: $(tail -1 $O/tests.log)"; grep -E "^FAILED|^ERROR" $O/tests.log | head
# 3. the GEMMs alone, A/B/C/D/A/B/C/D
e() { (cd $1 && step epi_$2 30 python dev/mlp_epilogue_ncu.py); echo "-- $2"; grep TFLOP $O/epi_$2.log; }
e . main; e .vdefer defer; e .vdp dp; e .vif2 if2; e . main2; e .vdefer defer2; e .vdp dp2; e .vif2 if2_2
# 4. where .vif2's GELU kernel waits: Nsight Compute's stall samples per SASS instruction (launch 8 = the GELU GEMM)
(cd .vif2 && step ncu_gelu $(rem 120) ncu --clock-control none -k regex:gemm_kernel --launch-skip 8 -c 1 --section SourceCounters \
  --section WarpStateStats --import-source no -f -o $O/gelu_src python dev/mlp_epilogue_ncu.py --ncu)
ncu -i $O/gelu_src.ncu-rep --page source --csv --print-source sass > $O/gelu_src_sass.csv 2> $O/ncu_export.log
ncu -i $O/gelu_src.ncu-rep --page details --csv > $O/gelu_details.csv 2>> $O/ncu_export.log
python - "$O/gelu_src_sass.csv" <<'PY' > $O/gelu_stalls_top.txt 2>&1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
print("columns:", list(rows[0]) if rows else "none")
key = next((k for k in rows[0] if "Warp Stall Sampling (All" in k), None) if rows else None
if key:
    tot = sum(float(r[key] or 0) for r in rows)
    for r in sorted(rows, key=lambda r: -float(r[key] or 0))[:60]:
        print(f"{float(r[key] or 0) / max(tot, 1):6.1%}  {r.get('Address', '')}  {r.get('Source', '')[:90]}")
PY
head -40 $O/gelu_stalls_top.txt; grep -i "stall" $O/gelu_details.csv | head -30
echo "all done at $((SECONDS - t0)) s"
rm -f $O/gelu_src.ncu-rep
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.txt *.csv 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
