#!/usr/bin/env bash
# Session 44's first call (~4 min, any card): why our attention forward takes 133 us a call in GPT-2 medium's step
# (s43b profile) against cuDNN's 112 while both take ~111 us alone.
#   1. dev/attention_in_step.py: the forward alone / after c_attn's GEMM / inside one block's forward GEMMs, ours and
#      cuDNN, 12 and 16 heads, per-kernel times from torch.profiler over CUDA-graph replays.
#   2. bench_train gpt2-medium torch,tk --profile --trace: each call of both forwards (and our backward) in the step.
export MAX_JOBS=10 BUILD_ARGS=" " LIMIT=${LIMIT:-420}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
step ais 90 python dev/attention_in_step.py; grep -E "^H=|Error|error" $O/ais.log | head -20
step med 170 python bench/bench_train.py --models gpt2-medium --kernels torch,tk --compile graphs --profile --top 30 --trace $O/tr --out $O/med
grep -E "tok/s|vs torch|gpt2-medium " $O/med.log | head -8
for p in attention_fwd_hopper attention_bwd_hopper hbwd_prep; do
  python dev/trace_kernel_calls.py $O/tr/gpt2-medium_tk_graphs.json $p > $O/tkc_$p.log; head -6 $O/tkc_$p.log; done
for p in fprop bprop; do
  python dev/trace_kernel_calls.py $O/tr/gpt2-medium_torch_graphs.json $p > $O/tcc_$p.log; head -6 $O/tcc_$p.log; done
python dev/trace_kernel_calls.py $O/tr/gpt2-medium_tk_graphs.json attention_fwd_hopper --list | head -80 > $O/tkc_list.log
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log med tr)
echo "all done at $((SECONDS - t0)) s"
