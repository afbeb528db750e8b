#!/usr/bin/env bash
# Session 24: Nsight Compute of the D = 64 causal attention backward at 12 and 16 heads (GPT-2 / GPT-2 medium,
# B 16, T 1024), ours and cuDNN's: why cuDNN gains per FLOP from 12 to 16 heads and ours does not (bench/RESULTS.md
# session 24). Carry [".gpu_data"]. ~5 min.
export MAX_JOBS=16 BUILD_ARGS="--family attention"
source dev/gpu_call_lib.sh
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
SECTIONS="--section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats --section WarpStateStats --section MemoryWorkloadAnalysis"
for H in 12 16; do
  step ncu_tk_$H 100 $NCU -k regex:attention_bwd_hopper --launch-skip 2 --launch-count 1 $SECTIONS \
    python dev/ncu_attention.py --impl tk --shape 16,$H,1024,64 --iters 3
  step ncu_cudnn_$H 100 $NCU -k regex:flash_bprop --launch-skip 2 --launch-count 1 $SECTIONS \
    python dev/ncu_attention.py --impl cudnn --shape 16,$H,1024,64 --iters 3
done
for f in $O/ncu_*.log; do echo "== $f"; grep -E "Duration|Elapsed Cycles|Compute \(SM\) Throughput|Memory Throughput|L2 Hit Rate|L1/TEX Hit|Registers Per|Achieved Occupancy|Issued Warp Per|No Eligible|Warp Cycles Per Issued|Grid Size|Block Size|Shared Memory Configuration Size|DRAM Throughput" $f | head -20; done
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
