#!/usr/bin/env bash
# Session 7's second GPU call: the loss-only classifier op and the optimizer step captured under CUDA graphs
# (train.py, bench_train.py), checked and timed.
#  1. where the import time goes on this machine: torch + dynamo + inductor, twice as installed and twice with
#     PYTHONPYCACHEPREFIX (is the venv's bytecode cached?)
#  2. at once (correctness only): the classifier GPU tests, the CUDA-graphs train test, and a control pair for
#     the GPT-2 loss parity (torch compiled vs torch eager: how far two PyTorch runs part in 300 steps)
#  3. alone: the full shakespeare_char under CUDA graphs with kernels=tk, time-stamped (as installed, then with
#     the bytecode cache of step 1), and the GPT-2 124M step, torch vs tk under graphs (bench_train.py)
source dev/gpu_call_lib.sh
imp="import time; t=time.time(); import torch, torch._dynamo, torch._inductor.compile_fx; print(f'{time.time()-t:.2f}')"
python -c "import torch, os; d = os.path.dirname(torch.__file__); print('torch at', d, 'writable', os.access(d, os.W_OK), 'dynamo pycache', os.path.isdir(d + '/_dynamo/__pycache__'))"
for i in 1 2; do echo "import as installed: $(python -c "$imp") s"; done
for i in 1 2; do echo "import with PYTHONPYCACHEPREFIX: $(PYTHONPYCACHEPREFIX=/tmp/pyc python -c "$imp") s"; done
( step test_classifier 200 python -m pytest -m gpu tests/classifier -x -q ) &
( step test_graphs 240 python -m pytest -m gpu tests/train/test_cuda_graphs_gpu.py -x -q -s ) &
( step lp_control 240 python bench/loss_parity.py --runs gpt2 --kernels torch,torch --b_args=--compile=False --out $O/lp_control ) &
wait
tail -3 $O/test_classifier.log; grep -E "cuda graphs|passed|failed|Error" $O/test_graphs.log | tail -5
sed -n '/steps, kernels/,/largest/p' $O/lp_control.log
pat="Overriding: kernels|using fused|replays as a CUDA graph|^\[.{9}(step 0|step 250|first|best|iter 5000)|timeline\]"
step timeline_tk 100 python dev/timeline.py -- python train.py config/train_shakespeare_char.py --kernels=tk \
  --compile=True --compile_mode=reduce-overhead --out_dir=$O/char_tk --overwrite=True
grep -E "$pat" $O/timeline_tk.log; rm -rf $O/char_tk
PYTHONPYCACHEPREFIX=/tmp/pyc step timeline_tk_pyc 100 python dev/timeline.py -- python train.py \
  config/train_shakespeare_char.py --kernels=tk --compile=True --compile_mode=reduce-overhead --out_dir=$O/char_tk --overwrite=True
grep -E "$pat" $O/timeline_tk_pyc.log; rm -rf $O/char_tk
step train_gpt2 150 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --profile --top 12 \
  --warmup 5 --iters 20 --out $O/train
grep -vE "^\s*$|Warning|_warn_once|wrote|cached" $O/train_gpt2.log | tail -40
cd $O && tar czf logs.tgz --exclude logs.tgz *.log lp_control/*.jsonl lp_control/*.json train/*.json 2>/dev/null
