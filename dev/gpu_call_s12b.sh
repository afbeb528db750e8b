#!/usr/bin/env bash
# Session 12, call 3: Nsight Compute of the Hopper classifier's two GEMMs (why the dx GEMM with the softmax in its
# mainloop runs at 0.55x cuBLAS's and the logits GEMM with the statistics epilogue at 0.90x).
source dev/gpu_call_lib.sh
python dev/classifier_ncu.py > $O/warm.log 2>&1
# launches matching "logits_kernel", in order: logits, dlogits of call 1, then of call 2 (profiled: skip 2, count 2)
step ncu 240 ncu -k regex:logits_kernel -c 2 --launch-skip 2 --section SpeedOfLight --section WarpStateStats \
  --section ComputeWorkloadAnalysis --section InstructionStats --section MemoryWorkloadAnalysis \
  --metrics sm__pipe_tensor_op_hgmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
  python dev/classifier_ncu.py
grep -E "logits_kernel|Duration|hgmma|pipe_xu|Stall|Issue Slots|Warp Cycles Per Issued|Executed Ipc A|Eligible|DRAM Throughput|L2 Hit|inst_executed|Compute \(SM\)" $O/ncu.log | cut -c1-150 | head -60
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
