#!/usr/bin/env bash
# Session 9, call B (~9 minutes, right after call A on the warm machine): 1. bench_classifier.py --profile (where the
# classifier's time goes beside torch.compile's, issue 10); 2. train.py's MFU (the mean iteration between log lines,
# sync included) beside bench_train.py's, both kernels, shakespeare_char under CUDA graphs (issue 12); 3. Nsight
# Compute of the attention FORWARD, ours and cuDNN's, at (8,16,2048,128) non-causal (our widest gap, 0.83x) and
# (16,12,1024,64) causal (issue 8).
source dev/gpu_call_lib.sh
step classifier 100 python bench/bench_classifier.py --C 768 --profile
sed -n '/per-kernel/,$p' $O/classifier.log | head -50; grep -E "^\|" $O/classifier.log | head -12
step mfu_bench 110 python bench/bench_train.py --models shakespeare_char --compile graphs --dropout 0.2 --kernels torch,tk
grep -E "^shakespeare_char |^\|" $O/mfu_bench.log | head
for k in torch tk; do
  timeout $(rem 70) python train.py config/train_shakespeare_char.py --kernels=$k --compile=True \
    --compile_mode=reduce-overhead --max_iters=1000 --eval_interval=5000 --eval_iters=20 --out_dir=$O/mfu_$k \
    --overwrite=True > $O/mfu_train_$k.log 2>&1
  echo "== train.py $k rc=$?: $(grep -E '^iter (500|990|1000):' $O/mfu_train_$k.log | tail -2 | tr '\n' ' ')"; rm -rf $O/mfu_$k
done
ncu_one() {  # ncu_one NAME IMPL KERNEL_REGEX SHAPE CAUSAL
  timeout $(rem 60) ncu -k "regex:$3" --launch-skip 3 --launch-count 1 --set full --import-source no \
    -o $O/$1 python dev/ncu_attention.py --impl $2 --shape $4 --causal $5 > $O/$1.log 2>&1
  echo "== ncu $1 rc=$? at $((SECONDS - t0)) s"
  ncu --import $O/$1.ncu-rep --page details > $O/$1_details.txt 2>&1
  ncu --import $O/$1.ncu-rep --page source --csv --print-source sass > $O/$1_sass.csv 2>&1
  grep -E "Duration|Registers Per|Issue Slots Busy|Executed Ipc A|Warp Cycles Per Issued|No Eligible|Executed Instructions  " $O/$1_details.txt | head -12
}
ncu_one fwd128_tk tk "attention_fwd_hopper" 8,16,2048,128 0
ncu_one fwd128_cudnn cudnn "fprop" 8,16,2048,128 0
ncu_one fwd64_tk tk "attention_fwd_hopper" 16,12,1024,64 1
ncu_one fwd64_cudnn cudnn "fprop" 16,12,1024,64 1
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json *.txt *.csv 2>/dev/null
