#!/usr/bin/env bash
# Session 18, fifth GPU call (issues 11 / 12): the MLP GEMM's GELU / GELU' epilogues against the plain store at
# GPT-2 124M's shape, timed, then under Nsight Compute (clocks left alone). Carry [".gpu_data"].
export MAX_JOBS=16 BUILD_ARGS="--family mlp"
source dev/gpu_call_lib.sh
step time 60 python dev/mlp_epilogue_ncu.py
cat $O/time.log
step ncu 150 ncu --clock-control none -k regex:gemm_kernel --launch-skip 8 -c 4 --section SpeedOfLight \
  --section WarpStateStats --section SchedulerStats --section ComputeWorkloadAnalysis --section InstructionStats \
  --section MemoryWorkloadAnalysis \
  --metrics sm__pipe_tensor_op_hgmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
  python dev/mlp_epilogue_ncu.py --ncu
grep -E "gemm_kernel|Duration|hgmma|pipe_xu|Stall|Issue Slots|Warp Cycles Per Issued|Executed Ipc A|Eligible|DRAM Throughput|L2 Hit|inst_executed|Compute \(SM\)|No Eligible|Issued Warp" $O/ncu.log | cut -c1-160 | head -90
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
