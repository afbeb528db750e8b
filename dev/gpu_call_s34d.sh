#!/usr/bin/env bash
# Session 34 (issue 8), after gpu_call_s34a.sh: was the D = 64 backward's dq_accum reduce traffic a limit? Nsight
# Compute of the main backward kernel at (4,16,4096,64) non-causal and (16,12,1024,64) causal, in main and in .vdq
# (the dQ^T halves patch): duration, L2 throughput, the L2's reduction sectors, stall reasons. Prep and carry as in
# gpu_call_s34a.sh. ~3 min.
export MAX_JOBS=12 LIMIT=${LIMIT:-300} BUILD_ARGS="--family attention" VARIANTS=".vdq" VARIANT_JOBS=6
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
ncu_one() {  # ncu_one TREE NAME SHAPE CAUSAL
  (cd $1 && timeout $(rem 90) ncu -k "regex:attention_bwd_hopper" --launch-skip 3 --launch-count 1 \
     --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
     --metrics lts__t_sectors_op_red.sum,lts__t_sectors_op_atom.sum,smsp__inst_executed.sum \
     python dev/ncu_attention.py --impl tk --shape $3 --causal $4 > $O/$2.txt 2>&1)
  echo "== $2: $(grep -E '^\s+Duration' $O/$2.txt | head -1 | awk '{print $NF, $(NF-1)}')"
  grep -E "lts__t_sectors_op_red.sum|smsp__inst_executed.sum|L2 Cache Throughput|Stall Long|No Eligible" $O/$2.txt | head -6
}
for t in ".:main" ".vdq:dq"; do
  ncu_one ${t%%:*} nc_${t#*:} 4,16,4096,64 0
  ncu_one ${t%%:*} ca_${t#*:} 16,12,1024,64 1
done
(cd $O && tar -czf logs.tgz *.log *.txt && rm -f *.log *.txt)
echo "all done at $((SECONDS - t0)) s"
