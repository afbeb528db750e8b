#!/usr/bin/env bash
# Prepared in session 8 for the next one (~6 minutes): the GPU-time views that session 8's eager numbers
# lacked. 1. bench_attention.py --graphs (CUDA-graph replays) at every shape, ours / flash / cuDNN: issue 8's
# table without the host-bound eager timing at (64,6,256,64); 2. bench_attention_dropout.py, eager and
# --graphs: issue 9's overhead as GPU time; 3. bench_classifier.py --profile: where the classifier's 7.08 ms
# go (the GEMMs cuBLAS picks per chunk, our softmax kernel) next to torch.compile's (issue 10); 4. train.py's
# MFU (now from the mean iteration time between log lines, the sync included) beside bench_train.py's, both
# kernels, shakespeare_char under CUDA graphs (issue 12: "MFU printed by train.py agrees with the benchmark's").
source dev/gpu_call_lib.sh
step attn_graphs 200 python bench/bench_attention.py --graphs --impls tk,flash,cudnn --json $O/bench_attention_graphs.json
sed -n '/^| shape/,/^$/p' $O/attn_graphs.log
for mode in eager graphs; do
  flag=$([ $mode = graphs ] && echo --graphs)
  step dropout_$mode 90 python bench/bench_attention_dropout.py $flag --json $O/dropout_$mode.json
  grep -E "^[0-9]+x|overhead" $O/dropout_$mode.log
done
step classifier 120 python bench/bench_classifier.py --C 768 --profile
sed -n '/per-kernel/,$p' $O/classifier.log | head -60
step mfu_bench 120 python bench/bench_train.py --models shakespeare_char --compile graphs --dropout 0.2 --kernels torch,tk
grep -E "^shakespeare_char " $O/mfu_bench.log
for k in torch tk; do
  timeout $(rem 80) python train.py config/train_shakespeare_char.py --kernels=$k --compile=True \
    --compile_mode=reduce-overhead --max_iters=1000 --eval_interval=5000 --eval_iters=20 --out_dir=$O/mfu_$k \
    --overwrite=True > $O/mfu_train_$k.log 2>&1
  echo "== train.py $k rc=$?: $(grep -E '^iter (500|990|1000):' $O/mfu_train_$k.log | tail -2 | tr '\n' ' ')"; rm -rf $O/mfu_$k
done
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null
