#!/usr/bin/env bash
# Session 5, GPU call 4 (the lead's; right after call 3 on the warm machine): host costs and benchmarks.
# Host us per tk op call (dev/host_costs.py) and the LayerNorm eager paths (dev/layernorm_host.py); the train
# step at a batch of 1 x 64 tokens (little GPU work: ~ the host's ms per step), torch vs tk, compile; GPT-2
# 124M torch vs tk with torch.compile (LayerNorm now left to inductor under compile) and tk with our
# LayerNorm forced under compile; the dropout overhead (bench_attention_dropout.py), LayerNorm plain and
# graphs, the MLP (pipeline-template GEMM) epilogue check and bench_mlp. Logs tarred into $OUT/logs.tgz.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
LIMIT=${LIMIT:-585}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
timeout $(rem 40) python dev/host_costs.py > $O/host_costs.log 2>&1; echo "host_costs rc=$?"; cat $O/host_costs.log
timeout $(rem 40) python dev/layernorm_host.py > $O/layernorm_host.log 2>&1; echo "layernorm_host rc=$?"; tail -14 $O/layernorm_host.log
bt() {  # bt NAME SECONDS args...: one bench_train run (via dev/bench_train_using.py when args start with a family)
  local name=$1 limit=$2; shift 2
  timeout -s SIGABRT $(rem $limit) python "$@" --out $O/$name > $O/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0)) s"; grep -E "^  \S+ \S+/\S+:" $O/$name.log
}
bt train_host 90 bench/bench_train.py --models gpt2 --kernels torch,tk --compile compile --batch_size 1 --block_size 64 --warmup 3 --iters 30
bt train_gpt2 150 bench/bench_train.py --models gpt2 --kernels torch,tk --compile compile --warmup 3 --iters 15
bt train_gpt2_ln 60 dev/bench_train_using.py layer_norm -- --models gpt2 --kernels tk --compile compile --warmup 3 --iters 15
timeout -s SIGABRT $(rem 60) python bench/bench_attention_dropout.py > $O/bench_attention_dropout.log 2>&1; echo "bench_attention_dropout rc=$? $((SECONDS - t0)) s"; tail -14 $O/bench_attention_dropout.log
timeout -s SIGABRT $(rem 60) python bench/bench_layernorm.py --impls tk,tk_ops,eager,compile --shapes 16384,768 16384,1024 16384,2048 > $O/bench_ln_plain.log 2>&1; echo "bench_ln plain rc=$?"; tail -8 $O/bench_ln_plain.log
timeout -s SIGABRT $(rem 60) python dev/hopper/check_mlp_epilogue.py --no-v1 > $O/check_mlp_epilogue.log 2>&1; echo "check_mlp_epilogue rc=$? $((SECONDS - t0)) s"; tail -22 $O/check_mlp_epilogue.log
timeout -s SIGABRT $(rem 30) python dev/attention_row_errors.py --shape 3,5,255,128 --full --seeds 16 > $O/row_errors.log 2>&1; echo "row_errors rc=$?"; tail -14 $O/row_errors.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log train_* 2>/dev/null
