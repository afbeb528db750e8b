#!/usr/bin/env bash
# Session 44's third call (~4 min, any card): s44b showed the H100 at its 700 W limit within a second of
# back-to-back block replays (SM clock 1980 -> 1400-1700 MHz) and our attention forward then 5% behind cuDNN's.
#   1. dev/sustained_pairs.py: each of our kernels and its PyTorch peer at GPT-2 medium's shapes, cold and after 2 s
#      of sustained load.
#   2. Nsight Compute counters (instructions, shared-memory wavefronts, L2 and DRAM bytes) of our attention forward
#      and x W^T GEMM beside cuDNN's / cuBLAS's: where ours spends more energy.
export MAX_JOBS=10 BUILD_ARGS=" " LIMIT=${LIMIT:-330}
source dev/gpu_call_lib.sh
step sp 120 python dev/sustained_pairs.py; grep -E "us, peer|Error|error" $O/sp.log | head -20
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
M=gpu__time_duration.sum,sm__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,lts__t_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__cycles_elapsed.avg.per_second,smsp__inst_executed_pipe_fma.sum,smsp__inst_executed_pipe_alu.sum,smsp__inst_executed_pipe_xu.sum
step ncu 90 $NCU --clock-control none --metrics $M -k "regex:attention_fwd_hopper|fprop|gemm|nvjet|xmma|cutlass" --launch-skip 4 -c 4 \
  python dev/sustained_pairs.py --ncu --only "x W^T (16384,4096" "attention fwd"
grep -E "^  [a-z_].*\(|gpu__time|sm__inst|wavefronts|lts__t_bytes|dram__bytes|per_second|pipe_" $O/ncu.log | cut -c1-150 | head -60
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
