#!/usr/bin/env bash
# Session 5, GPU call 1 (the lead's): verification of main after merging s4-bwd-integrate (per-(D, causal)
# Hopper backward loop and L2-grouped causal launch order) and s4-host-overhead (the ops' Python host
# cuts): build, the Hopper backward's float64 checks and timing, then every GPU test: attention on the
# default (Hopper) paths and with both portable paths forced, LayerNorm, classifier, MLP (its bad-shape
# test: the std::to_string error messages), the train tests (CUDA graphs, torchrun) and the model.
# Logs tarred into $OUT/logs.tgz.
export SHAKESPEARE_INPUT=$PWD/.gpu_data/input.txt PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
LIMIT=${LIMIT:-585}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv,noheader
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
t() {  # t NAME SECONDS "ENV=... ENV=..." pytest-args...: one pytest run, its last line
  local name=$1 limit=$2 vars=$3; shift 3
  env $vars timeout -s SIGABRT $(rem $limit) python -m pytest -m gpu -q -p no:cacheprovider "$@" > $O/$name.log 2>&1
  echo "$name rc=$? $(tail -1 $O/$name.log) $((SECONDS - t0)) s"; grep -E "^FAILED|^ERROR" $O/$name.log | head -8
}
timeout -s SIGABRT $(rem 80) python dev/hopper/check_attention_bwd.py > $O/check_attention_bwd.log 2>&1
echo "check_attention_bwd rc=$? $((SECONDS - t0)) s"; grep -iE "fail|pass|ok " $O/check_attention_bwd.log | tail -4; tail -22 $O/check_attention_bwd.log
t attn 130 "" tests/attention/test_attention_gpu.py tests/attention/test_attention_hopper_bwd_gpu.py tests/attention/test_attention_dropout_gpu.py
t attn_portable 90 "TK_ATTENTION_PATH=portable TK_ATTENTION_BWD=portable" tests/attention/test_attention_gpu.py
t mlp 50 "" tests/mlp
t layernorm 60 "" tests/layernorm/test_layernorm_gpu.py
t classifier 40 "" tests/classifier/test_classifier_gpu.py
t train_model 100 "" tests/train/test_cuda_graphs_gpu.py tests/train/test_torchrun_gpu.py
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null
