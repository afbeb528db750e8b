#!/usr/bin/env bash
# Session 33's last call (issue 8): why the non-causal D = 128 Hopper backward drops from 528 TFLOP/s at
# (2,16,8192,128) to 474 at (1,16,16384,128) (0.858x cuDNN there, s33c) while cuDNN gains (530 -> 552). Nsight
# Compute (--set full, one launch of the main kernel, the 4th) at both shapes, and cuDNN's kernel at the long one;
# the details pages come back as text, the reports stay on the machine. Carry [".gpu_data"].
export MAX_JOBS=12 LIMIT=${LIMIT:-420} BUILD_ARGS="--family attention"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
ncu_one() {  # ncu_one NAME IMPL KERNEL_REGEX SHAPE
  timeout $(rem 120) ncu -k "regex:$3" --launch-skip 3 --launch-count 1 --set full --import-source no \
    -o /tmp/$1 python dev/ncu_attention.py --impl $2 --shape $4 --causal 0 > $O/$1.log 2>&1
  echo "== ncu $1 rc=$? at $((SECONDS - t0)) s"
  ncu --import /tmp/$1.ncu-rep --page details > $O/$1_details.txt 2>&1
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|L2 Hit Rate|L1/TEX Hit|DRAM Throughput|Executed Ipc A|Issue Slots Busy|No Eligible|Registers Per|Achieved Occupancy|Theoretical Occ" $O/$1_details.txt | head -16
}
ncu_one b8k tk "attention_bwd_hopper" 2,16,8192,128
ncu_one b16k tk "attention_bwd_hopper" 1,16,16384,128
ncu_one c16k cudnn "flash_bprop" 1,16,16384,128
(cd $O && tar -czf logs.tgz *.log *.txt && rm -f *.log *.txt)
echo "all done at $((SECONDS - t0)) s"
