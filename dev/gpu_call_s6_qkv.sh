#!/usr/bin/env bash
# Branch s6-qkv, its GPU verification (one call, ~8 minutes on an H200): the attention on the fused qkv projection
# (tk::attention_qkv_fwd / _bwd; the backward writes dq, dk, dv into the three views of one (B, T, 3C) gradient
# through the extension's new attention_backward_into). Its GPU tests (against the q, k, v ops: bitwise with the
# deterministic backward, dK / dV bitwise and dQ to the rounding on the default Hopper and the portable backward;
# dropout, opcheck, the binding's output checks, the compiled GPT's backward graph reading dqkv through views only,
# the eager GPT bitwise the views model, CUDA-graph capture), the existing tests the model's switch touches (every
# GPU test that runs the GPT with kernels=tk, CUDA graphs in train.py), then the train step: kernels=torch, tk on
# the q, k, v views (main's path) and tk fused, with the per-family profile and the kernels that differ most
# between the two tk variants. Logs in $OUT/logs.tgz.
export SHAKESPEARE_INPUT=$PWD/.gpu_data/input.txt PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
LIMIT=${LIMIT:-585}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
python -m tk_kernels.build --family attention > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
t() {  # t NAME SECONDS "ENV=... ENV=..." pytest-args...: one pytest run, its last line and failures
  local name=$1 limit=$2 vars=$3; shift 3
  env $vars timeout -s SIGABRT $(rem $limit) python -m pytest -m gpu -q -p no:cacheprovider --tb=short "$@" > $O/$name.log 2>&1
  echo "$name rc=$? $(grep -E 'passed|failed' $O/$name.log | tail -1) $((SECONDS - t0)) s"; grep -E "^FAILED|^ERROR|Fatal" $O/$name.log | head -8
}
t qkv 150 "" tests/attention/test_attention_qkv_gpu.py
t touched 180 "" tests/attention/test_attention_gpu.py tests/attention/test_attention_dropout_gpu.py \
  tests/layernorm/test_layernorm_gpu.py tests/classifier/test_classifier_gpu.py tests/mlp/test_mlp_gpu.py \
  -k "compiled or opcheck or graph or eval_mode or training_losses or training_steps"
timeout -s SIGABRT $(rem 200) python dev/bench_train_qkv.py --models gpt2 --compile compile --rounds 1 --profile --top 12 \
  > $O/bench_train_qkv.log 2>&1
echo "bench_train_qkv rc=$? $((SECONDS - t0)) s"; sed -n '/best of/,$p' $O/bench_train_qkv.log | head -40
t graphs_train 120 "" tests/train/test_cuda_graphs_gpu.py
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null
