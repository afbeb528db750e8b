#!/usr/bin/env bash
# Session 14, issue 11: the MLP family's weight gradients on cuBLAS (torch.mm, fp32 out; ops._weight_grad), which
# dev/mlp_dw_variants.py measured faster than our split-K GEMM in s14a. 1. the MLP GPU tests; 2. bench_mlp; 3. the
# train step with the family on (dev/bench_train_using.py mlp, torch and tk in one process, GPT-2 124M under CUDA
# graphs), then tk as shipped (family off) in the next process.
source dev/gpu_call_lib.sh
step tests_mlp 120 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp
tail -1 $O/tests_mlp.log; grep -E "^FAILED|^ERROR" $O/tests_mlp.log | head
step bench_mlp 60 python bench/bench_mlp.py --skip-gemm --json $O/bench_mlp.json
grep -A5 "vs best" $O/bench_mlp.log | head -6
step train_mlp 170 python dev/bench_train_using.py mlp -- --models gpt2 --compile graphs --kernels torch,tk \
  --profile --top 30 --out $O/train_mlp
sed -n '/^model /,/^top/p' $O/train_mlp.log | head -10
step train_tk 90 python bench/bench_train.py --models gpt2 --compile graphs --kernels tk --out $O/train_tk
sed -n '/^model /,/^wrote/p' $O/train_tk.log | head -6
cp $O/train_mlp/bench_train.json $O/bench_train_mlp.json 2>/dev/null; cp $O/train_tk/bench_train.json $O/bench_train_tk.json 2>/dev/null
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
