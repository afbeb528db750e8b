#!/usr/bin/env bash
# Session 6's prepared third GPU call (warm): speed, side by side in one process per command. The Hopper forward's
# variants (dev/hopper/check_fwd_variants.py: overlap, poly8, poly4: accuracy, then forward TFLOP/s interleaved
# with the shipped kernel and cuDNN at p = 0 and 0.2), the attention table with the dropout overhead
# (bench/bench_attention.py), the GPT-2 124M train step torch vs tk (compile), and the full shakespeare_char run
# with kernels=tk under CUDA graphs alone on the GPU (issue 12's < 60 s target), beside kernels=torch's.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
export SHAKESPEARE_INPUT=$PWD/.gpu_data/input.txt
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
LIMIT=${LIMIT:-585}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
timeout -s SIGABRT $(rem 200) python dev/hopper/check_fwd_variants.py > $O/fwd_variants.log 2>&1
echo "fwd_variants rc=$? $((SECONDS - t0)) s"; grep -E "checks|CHECKS|TFLOP|^\(" $O/fwd_variants.log | head -40
timeout -s SIGABRT $(rem 130) python bench/bench_attention.py --out $O/attn > $O/bench_attention.log 2>&1
echo "bench_attention rc=$? $((SECONDS - t0)) s"; tail -30 $O/bench_attention.log
timeout -s SIGABRT $(rem 120) python bench/bench_train.py --models gpt2 --kernels torch,tk --compile compile --profile --top 30 \
  --warmup 3 --iters 15 --out $O/train > $O/bench_train.log 2>&1
echo "bench_train rc=$? $((SECONDS - t0)) s"; grep -vE "^\s*$|Warning|_warn_once|wrote|cached" $O/bench_train.log | tail -75
timeout -s SIGABRT $(rem 60) python dev/mlp_dw_variants.py > $O/mlp_dw.log 2>&1; echo "mlp_dw rc=$?"; tail -5 $O/mlp_dw.log
timeout -s SIGABRT $(rem 40) python dev/optim_step.py > $O/optim_step.log 2>&1; echo "optim_step rc=$?"; tail -7 $O/optim_step.log
python data/shakespeare_char/prepare.py --input "$SHAKESPEARE_INPUT" > /dev/null 2>&1
for k in tk torch; do
  ts=$SECONDS
  timeout -s SIGABRT $(rem 130) python train.py config/train_shakespeare_char.py --kernels=$k --compile=True \
    --compile_mode=reduce-overhead --out_dir=$O/char_$k --overwrite=True --log_file=$O/char_$k.jsonl > $O/char_$k.log 2>&1
  echo "shakespeare_char kernels=$k graphs rc=$? wall $((SECONDS - ts)) s: $(grep 'best val loss' $O/char_$k.log)"
  grep -E "^step|estimated" $O/char_$k.log | tail -3
  rm -rf $O/char_$k
done
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.jsonl attn train 2>/dev/null
