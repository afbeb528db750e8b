#!/usr/bin/env bash
# Session 6's prepared third GPU call (warm): speed, side by side in one process per command. The Hopper forward's
# variants (dev/hopper/check_fwd_variants.py: overlap, poly8, poly4: accuracy, then forward TFLOP/s interleaved
# with the shipped kernel and cuDNN at p = 0 and 0.2, three shapes), the attention table with the dropout
# overhead (bench/bench_attention.py), the GPT-2 124M train step torch vs tk (compile, with the top kernels of the
# profile), the MLP's weight gradients on cuBLAS vs ours (dev/mlp_dw_variants.py) and the optimizer step's variants
# (dev/optim_step.py).
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
export SHAKESPEARE_INPUT=$PWD/.gpu_data/input.txt
O=${OUT:-out}; mkdir -p $O $O/attn
t0=$SECONDS
LIMIT=${LIMIT:-585}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
timeout -s SIGABRT $(rem 150) python dev/hopper/check_fwd_variants.py --quick > $O/fwd_variants.log 2>&1
echo "fwd_variants rc=$? $((SECONDS - t0)) s"; grep -E "checks|CHECKS|TFLOP|^\(" $O/fwd_variants.log | head -40
timeout -s SIGABRT $(rem 130) python bench/bench_attention.py --impls tk,flash,cudnn --json $O/attn/attention.json --png $O/attn/attention.png > $O/bench_attention.log 2>&1
echo "bench_attention rc=$? $((SECONDS - t0)) s"; tail -30 $O/bench_attention.log
timeout -s SIGABRT $(rem 60) python bench/bench_attention_dropout.py > $O/bench_attention_dropout.log 2>&1; echo "bench_attention_dropout rc=$?"; tail -8 $O/bench_attention_dropout.log
timeout -s SIGABRT $(rem 120) python bench/bench_train.py --models gpt2 --kernels torch,tk --compile compile --profile --top 30 \
  --warmup 3 --iters 15 --out $O/train > $O/bench_train.log 2>&1
echo "bench_train rc=$? $((SECONDS - t0)) s"; grep -vE "^\s*$|Warning|_warn_once|wrote|cached" $O/bench_train.log | tail -75
timeout -s SIGABRT $(rem 60) python dev/mlp_dw_variants.py > $O/mlp_dw.log 2>&1; echo "mlp_dw rc=$?"; tail -5 $O/mlp_dw.log
timeout -s SIGABRT $(rem 40) python dev/optim_step.py > $O/optim_step.log 2>&1; echo "optim_step rc=$?"; tail -7 $O/optim_step.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log attn train 2>/dev/null
