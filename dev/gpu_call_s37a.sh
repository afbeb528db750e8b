#!/usr/bin/env bash
# Session 37, first call (issues 8 / 12): the Hopper backward's prep kernel zero-fills dq_accum
# (dev/patches/attention_bwd_prep_zero_fill.patch; the binding then allocates it with at::empty). s36e's breakdown
# (dev/attention_bwd_breakdown.py, H100, (8,16,2048,128) non-causal, us per backward): ours main kernel 1268.8 + dq
# convert 71.8 + prep 55.9 + ATen's zero fill of dq_accum 40.4; cuDNN main 1176.7 + convert 73.1 + dot(dO, O) 91.6,
# no fill (its dot kernel evidently writes the zeros). In GPT-2's step the fill is 15 us a layer.
#   bash dev/gpu_call_s37a.sh        the backward's kernels in main and .vzf (attention_bwd_pieces --time, the
#                                    breakdown), outputs compared (dK, dV bitwise), bench_attention all shapes main /
#                                    .vzf / main / .vzf, pytest -m gpu tests/attention in .vzf (its poisoned workspaces
#                                    would show a missed zero as NaN), then Nsight Compute's stall samples of the
#                                    D = 128 backward, ours and cuDNN's (dev/ncu_stalls.py)
#   bash dev/gpu_call_s37a.sh step   (right after, warm) GPT-2's step main / .vzf alternated (train_abab), memcheck
# Prep: rm -rf .vzf && mkdir .vzf && git archive HEAD | tar -x -C .vzf &&
#       (cd .vzf && patch -p1 < ../dev/patches/attention_bwd_prep_zero_fill.patch); carry [".gpu_data", ".vzf"].
if [ "$1" = step ]; then export MAX_JOBS=8 VARIANT_BUILD_ARGS=" "; else export MAX_JOBS=8 BUILD_ARGS="--family attention"; fi
export VARIANTS=".vzf" VARIANT_JOBS=8 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
if [ "$1" = step ]; then
  train_abab .vzf
  step ref_s 30 python dev/attention_bwd_pieces.py --save /tmp/ref_small.pt --small
  (cd .vzf && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step san_memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
     python dev/attention_bwd_pieces.py --compare /tmp/ref_small.pt --small); grep "ERROR SUMMARY" $O/san_memcheck.log
else
  step pt_m 40 python dev/attention_bwd_pieces.py --time; grep "^time" $O/pt_m.log
  (cd .vzf && step pt_z 40 python dev/attention_bwd_pieces.py --time); grep "^time" $O/pt_z.log
  (cd .vzf && step br_z 40 python dev/attention_bwd_breakdown.py); grep -E "us per backward|^ +[0-9.]+ us" $O/br_z.log | cut -c1-110
  step ref 40 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
  (cd .vzf && step cmp 40 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -1 $O/cmp.log
  ba() {  # ba TREE TAG
    (cd $1 && step ba_$2 45 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn)
    echo "-- $2 bwd: $(grep '^| (' $O/ba_$2.log | grep bwd | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"
  }
  ba . main1; ba .vzf z1; ba . main2; ba .vzf z2
  (cd .vzf && step t_att 200 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_att.log
  grep "^FAILED" $O/t_att.log | head -5
  # where the D = 128 backward's warps stall, ours beside cuDNN's (s36e: cuDNN's stall less; dev/README, session 36)
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  for x in "tk attention_bwd_hopper 2" "cudnn flash_bprop 0"; do set -- $x
    step ncu_$1 60 $NCU -k regex:$2 --launch-skip $3 -c 1 --section SourceCounters --section WarpStateStats \
      --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SpeedOfLight -o $O/st_$1 \
      python dev/ncu_attention.py --impl $1 --shape 8,16,2048,128 --causal 0
    $NCU -i $O/st_$1.ncu-rep --page details --print-details all > $O/details_$1.log 2>&1
    grep -iE "pipe|shared|bank|Elapsed Cycles|Issue Slots|Executed Ipc" $O/details_$1.log | head -30
    $NCU -i $O/st_$1.ncu-rep --page source --csv --print-source sass > $O/st_$1.csv 2>/dev/null
    python dev/ncu_stalls.py $O/st_$1.csv --top 25 > $O/stalls_$1.log 2>&1; head -40 $O/stalls_$1.log
  done
fi
(cd $O && tar -czf logs.tgz *.log *.csv && rm -rf *.log *.csv *.ncu-rep)
echo "all done at $((SECONDS - t0)) s"
