#!/usr/bin/env bash
# Session 23: does tk_kernels.AdamW train the same models? bench/loss_parity.py, 300 steps, same seed: kernels=tk with
# the optimizer family off (TK_TORCH_FAMILIES=optimizer: torch's fused AdamW + clip_grad_norm_) against on, for GPT-2
# 124M (no dropout) and shakespeare_char (dropout 0.2); then torch vs tk for GPT-2 if time is left.
# Carry [".gpu_data"]. ~8 min.
export MAX_JOBS=16 LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step parity_opt 330 python bench/loss_parity.py --runs gpt2,shakespeare_char --kernels tk,tk \
  --a_env TK_TORCH_FAMILIES=optimizer --out $O/parity_opt
grep -vE "^\s*$" $O/parity_opt.log | tail -40 | cut -c1-150
step parity_tt 200 python bench/loss_parity.py --runs gpt2 --kernels torch,tk --out $O/parity_tt
grep -vE "^\s*$" $O/parity_tt.log | tail -14 | cut -c1-150
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log parity_*/*.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
