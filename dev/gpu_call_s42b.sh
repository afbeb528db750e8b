#!/usr/bin/env bash
# Session 42, main with the TMA dK / dV stores merged (s42a: +1-12% backward, GPT-2 tk step -0.35 ms): the record.
# bench_attention (both masks, 2 rounds, tk and cuDNN), then GPT-2 124M and GPT-2 medium, torch and tk under
# torch.compile + CUDA graphs (bench_train), each model its own process.
#   carry [".gpu_data"]
export MAX_JOBS=16 BUILD_ARGS=" " LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
ba . m1
grep '^| (' $O/ba_m1.log | grep fwd | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}'; echo
step train_124 150 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train_124
grep "tok/s" $O/train_124.log | head -2
step train_350 200 python bench/bench_train.py --models gpt2-medium --kernels torch,tk --compile graphs --out $O/train_350
grep "tok/s" $O/train_350.log | head -2
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log train_*)
echo "all done at $((SECONDS - t0)) s"
