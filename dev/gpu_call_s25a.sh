#!/usr/bin/env bash
# Session 25, first call: main (97c01d4 and after) as it stands. The attention GPU suite on the merged launch-group
# source (session 24 ran only parts of it there), GPT-2's step torch / tk with the whole tk kernel list (issue 12's
# small items, named per kernel), then GPT-2 medium torch / tk (issue 12's 350M; not measured since 97c01d4).
# Carry [".gpu_data"]. ~9.5 min.
export MAX_JOBS=16
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
step attn_tests 210 python -m pytest -m gpu -q -x -p no:cacheprovider tests/attention
tail -3 $O/attn_tests.log
step gpt2 150 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --profile --top 160 --out $O/gpt2
grep "tok/s" $O/gpt2.log | head -2
grep -A12 "op family" $O/gpt2.log
step medium 240 python bench/bench_train.py --models gpt2-medium --kernels torch,tk --compile graphs --out $O/medium
grep "tok/s" $O/medium.log | head -2
echo "all done at $((SECONDS - t0)) s"
