#!/usr/bin/env bash
# Session 13, call 3: the MLP family in the whole train step, never timed there (its not_used verdict came from
# bench_mlp.py, where torch.compile's MLP, 1.207 ms at C = 768, is slower than eager's 0.952, while the step compiles
# the MLP: its GELU, GELU' and bias-gradient Triton kernels took 2.64 ms of call 2's tk/graphs step).
# 1. classifier GPU tests (the N = 1 flake fixed); 2. bench_train.py via dev/bench_train_using.py mlp: torch vs tk with
# the MLP family on, GPT-2 124M and 350M under CUDA graphs, profiled; 3. tk as shipped (MLP on PyTorch), same models.
source dev/gpu_call_lib.sh
step tests_cls 120 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/classifier
tail -1 $O/tests_cls.log; grep -E "^FAILED|^ERROR" $O/tests_cls.log | head
step train_mlp 300 python dev/bench_train_using.py mlp -- --models gpt2,gpt2-medium --compile graphs --kernels torch,tk \
  --profile --top 30 --out $O/train_mlp
sed -n '/^model /,/^top/p' $O/train_mlp.log | head -14
step train_tk 150 python bench/bench_train.py --models gpt2,gpt2-medium --compile graphs --kernels tk --profile --out $O/train_tk
sed -n '/^model /,/^wrote/p' $O/train_tk.log | head -12
cp $O/train_mlp/bench_train.json $O/bench_train_mlp.json; cp $O/train_tk/bench_train.json $O/bench_train_tk.json
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
