#!/usr/bin/env bash
# Session 7's first GPU call: issue 12's loss parity and where shakespeare_char's wall time goes.
#  1. bench/loss_parity.py, both runs (shakespeare_char 300 steps with its dropout; GPT-2 124M 300 steps on
#     tiny shakespeare in BPE), the two runs at once (four train.py processes on the GPU: losses only)
#  2. the full config/train_shakespeare_char.py under CUDA graphs, tk then torch, alone on the GPU, each line
#     time-stamped from launch (dev/timeline.py): imports, set-up, compiles, evals, exit
#  3. the shakespeare_char step with its dropout 0.2, torch vs tk, graphs, with the top kernels of the profile
#  4. evaluation at k batches per call (dev/eval_batch.py) and the optimizer variants on its parameters
source dev/gpu_call_lib.sh
( step lp_char 260 python bench/loss_parity.py --runs shakespeare_char --out $O/lp_char ) &
( step lp_gpt2 260 python bench/loss_parity.py --runs gpt2 --out $O/lp_gpt2 ) &
wait
for r in lp_char lp_gpt2; do sed -n '/steps, kernels/,/largest/p' $O/$r.log; done
for k in tk torch; do
  step timeline_$k 110 python dev/timeline.py -- python train.py config/train_shakespeare_char.py --kernels=$k \
    --compile=True --compile_mode=reduce-overhead --out_dir=$O/char_$k --overwrite=True
  grep -E "Overriding: kernels|found vocab|cached|kernels=|using fused|^\[.{9}(step|first|best|checkpoint \(|iter 5000)|timeline\]" $O/timeline_$k.log | head -24
  rm -rf $O/char_$k
done
step train_char 90 python bench/bench_train.py --models shakespeare_char --kernels torch,tk --compile graphs \
  --dropout 0.2 --profile --top 25 --warmup 5 --iters 50 --out $O/train
grep -vE "^\s*$|Warning|_warn_once|wrote|cached" $O/train_char.log | tail -62
step eval_batch 60 python dev/eval_batch.py; cat $O/eval_batch.log | grep -v Warn
step optim 30 python dev/optim_step.py --model shakespeare_char; tail -8 $O/optim.log
step optim_gpt2 30 python dev/optim_step.py --model gpt2; tail -8 $O/optim_gpt2.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log lp_char/*.jsonl lp_char/*.log lp_char/*.json lp_gpt2/*.jsonl lp_gpt2/*.log lp_gpt2/*.json train/*.json 2>/dev/null
