#!/usr/bin/env bash
# Session 21, call 2 of 2 (the warm machine of gpu_call_s21b.sh, whose builds it reuses): the GPT-2 124M step on main
# and on TREE (default .vif2), A/B/A, then the MLP fwd+bwd benchmark on TREE. Carry [".gpu_data", "$TREE"].
TREE=${TREE:-.vif2}
export MAX_JOBS=16 VARIANTS="$TREE" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step train_main 140 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train_main
tail -4 $O/train_main.log
(cd $TREE && step train_tree 110 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train_tree)
tail -3 $O/train_tree.log
step train_main2 110 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train_main2
tail -3 $O/train_main2.log
(cd $TREE && step mlp_tree 150 python bench/bench_mlp.py --skip-gemm --json $O/mlp_tree.json)
tail -12 $O/mlp_tree.log
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json train_* 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
