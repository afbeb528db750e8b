#!/usr/bin/env bash
# Prepared in session 18: Nsight Compute of the MLP GEMM's four launches at GPT-2's shape with the warp stall
# reasons (s18e's profile had none), on main and on .variant (as gpu_call_s19a.sh prepares it). Clocks left alone.
# Carry [".gpu_data", ".variant"].
export MAX_JOBS=10 BUILD_ARGS="--family mlp" VARIANTS=".variant" VARIANT_JOBS=6 VARIANT_BUILD_ARGS="--family mlp"
source dev/gpu_call_lib.sh
prof() {  # tree name
  (cd $1 && step ncu_$2 120 ncu --clock-control none -k regex:gemm_kernel --launch-skip 8 -c 4 --section SpeedOfLight \
    --section WarpStateStats --section SchedulerStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum" \
    python dev/mlp_epilogue_ncu.py --ncu)
  grep -E "gemm_kernel<|Duration|stalled|Issue Slots|Eligible Warps" $O/ncu_$2.log | awk '$NF+0 > 0.05 || /gemm_kernel|Duration|Issue|Eligible/' | cut -c1-150
}
prof . main; prof .variant pieces
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
