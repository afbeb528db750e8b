#!/usr/bin/env bash
# Session 36, last call (issue 8): why the non-causal D = 128 backward trails cuDNN most at short T (0.90x at
# (8,16,2048,128), 0.97x at (1,16,16384,128)), persistence not having helped (s36d). 1. every kernel of a backward,
# ours beside cuDNN's (dev/attention_bwd_breakdown.py); 2. Nsight Compute on our main kernel and cuDNN's at
# (8,16,2048,128) non-causal: speed of light, warp states, scheduler, instructions, memory tables. No prep; carry
# [".gpu_data"].
export MAX_JOBS=16 BUILD_ARGS="--family attention" LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step br 60 python dev/attention_bwd_breakdown.py --shapes "8,16,2048,128;1,16,16384,128" --causal 0
grep -E "us per backward|^ +[0-9.]+ us" $O/br.log | cut -c1-130 | head -40
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats --section MemoryWorkloadAnalysis_Tables --section LaunchStats --section Occupancy"
step ncu_tk 90 $NCU -k regex:attention_bwd_hopper --launch-skip 2 --launch-count 1 $SEC python dev/ncu_attention.py --impl tk --shape 8,16,2048,128 --causal 0
grep -E "Duration|Throughput|Executed Ipc|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Stall|Registers|Shared Memory Configuration|Executed Instructions " $O/ncu_tk.log | head -40
CK=$(grep "^TOP cudnn" $O/br.log | head -1 | cut -d' ' -f3- | cut -c1-40 | sed 's/[^A-Za-z0-9_]/./g')
echo "cudnn kernel regex: $CK"
step ncu_cd 90 $NCU -k "regex:$CK" --launch-skip 2 --launch-count 1 $SEC python dev/ncu_attention.py --impl cudnn --shape 8,16,2048,128 --causal 0
grep -E "Duration|Throughput|Executed Ipc|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Stall|Registers|Shared Memory Configuration|Executed Instructions |Grid Size|Block Size" $O/ncu_cd.log | head -40
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
