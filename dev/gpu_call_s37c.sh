#!/usr/bin/env bash
# Session 37, second call (issue 8): the checks of a backward tree from gpu_call_s37b.sh and where its D = 128
# backward stalls, beside cuDNN's.  bash dev/gpu_call_s37c.sh TREE   (TREE: .vzf, .vred, or . for main; ~8 min)
#   1. pytest -m gpu tests/attention in TREE (the backward tests poison dq_accum, Delta and lse2: a missed zero or a
#      lost reduction shows); 2. compute-sanitizer memcheck / racecheck over attention_bwd_pieces --small in TREE;
#   3. Nsight Compute at (8,16,2048,128) non-causal: stall reasons per SASS line (dev/ncu_stalls.py) and the compute /
#      memory workload sections (pipe and shared-memory use) of TREE's main kernel and cuDNN's.
# Prep: none for main (TREE = .); a patched tree as in gpu_call_s37b.sh (its merged patches are in git history);
# carry [".gpu_data", TREE].
T=${1:-.}
export MAX_JOBS=8 BUILD_ARGS="--family attention" LIMIT=${LIMIT:-585}
[ "$T" != . ] && export VARIANTS="$T" VARIANT_JOBS=8
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd $T && step t_att 220 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_att.log
grep "^FAILED" $O/t_att.log | head -5
sanitize $T 60 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for x in "tk attention_bwd_hopper 2 $T" "cudnn flash_bprop 0 ."; do set -- $x
  (cd $4 && step ncu_$1 60 $NCU -k regex:$2 --launch-skip $3 -c 1 --section SourceCounters --section WarpStateStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section SpeedOfLight -o $(cd $O && pwd)/st_$1 \
    python dev/ncu_attention.py --impl $1 --shape 8,16,2048,128 --causal 0)
  $NCU -i $O/st_$1.ncu-rep --page details --print-details all > $O/details_$1.log 2>&1
  grep -iE "pipe|shared|bank|Elapsed Cycles|Issue Slots|Executed Ipc|Warp Cycles|No Eligible" $O/details_$1.log | head -40
  $NCU -i $O/st_$1.ncu-rep --page source --csv --print-source sass > $O/st_$1.csv 2>/dev/null
  python dev/ncu_stalls.py $O/st_$1.csv --top 30 > $O/stalls_$1.log 2>&1; head -45 $O/stalls_$1.log
done
(cd $O && tar -czf logs.tgz *.log *.csv && rm -rf *.log *.csv *.ncu-rep)
echo "all done at $((SECONDS - t0)) s"
