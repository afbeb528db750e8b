#!/usr/bin/env bash
# Session 5, GPU call 3 (the lead's): verification of main after merging the Hopper dropout (s5-dropout),
# the pipeline template with the MLP GEMM on it (s5-pipeline), the LayerNorm C++ eager autograd
# (s5-ln-cpp), the tensor-map context fix and the test fixes of call 1: build, the Hopper dropout checks,
# every attention GPU test (the dropout matrix now on both paths), MLP tests + the stream-K dW check,
# LayerNorm tests, the classifier test that failed, then the train tests with their tracebacks.
# Logs tarred into $OUT/logs.tgz.
export SHAKESPEARE_INPUT=$PWD/.gpu_data/input.txt PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
LIMIT=${LIMIT:-585}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
t() {  # t NAME SECONDS "ENV=... ENV=..." pytest-args...: one pytest run, its last line and failures
  local name=$1 limit=$2 vars=$3; shift 3
  env $vars timeout -s SIGABRT $(rem $limit) python -m pytest -m gpu -q -p no:cacheprovider --tb=short "$@" > $O/$name.log 2>&1
  echo "$name rc=$? $(grep -E 'passed|failed' $O/$name.log | tail -1) $((SECONDS - t0)) s"; grep -E "^FAILED|^ERROR" $O/$name.log | head -8
}
timeout -s SIGABRT $(rem 90) python dev/hopper/check_attention_dropout.py > $O/check_attention_dropout.log 2>&1
echo "check_attention_dropout rc=$? $((SECONDS - t0)) s"; grep -iE "WRONG|FAIL|error" $O/check_attention_dropout.log | head -8; tail -16 $O/check_attention_dropout.log
t attn 170 "" tests/attention
t mlp 60 "" tests/mlp
timeout -s SIGABRT $(rem 45) python dev/hopper/check_mlp_dw.py > $O/check_mlp_dw.log 2>&1; echo "check_mlp_dw rc=$? $((SECONDS - t0)) s"; grep -E "WRONG|Error" $O/check_mlp_dw.log | head -5; tail -12 $O/check_mlp_dw.log
t layernorm 90 "" tests/layernorm
t classifier 30 "" tests/classifier/test_classifier_gpu.py -k "grad_output or opcheck"
t train 200 "" -x tests/train/test_cuda_graphs_gpu.py tests/train/test_torchrun_gpu.py
grep -B5 -A40 "^_____" $O/train.log | grep -vE "^\s*$" | head -60
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null
