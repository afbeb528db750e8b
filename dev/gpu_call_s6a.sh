#!/usr/bin/env bash
# Prepared in session 6 (no GPU lent then) for the next session's first GPU call, run on branch s6-integration:
# main (whose session-5 host-glue changes no GPU ran yet: one backward_impl, support.py, the CUDA-graphs .grad
# buffers) + the revert of 81e3126 (the spill-free D=128 dropout backward, s5-bwd-spill) + s5-attn-pipeline
# (the Hopper forward on the pipeline template) + s5-bwd-pipeline (the Hopper backward on it) + s6-qkv (the
# attention on the fused qkv projection, tests/attention/test_attention_qkv_gpu.py). Correctness
# first: the Hopper dropout and backward check scripts (float64 cases, the dropout mask, timings beside cuDNN), then
# every attention GPU test (the Hopper forward's float64 matrix among them) and the other families' GPU tests. Logs tarred into $OUT/logs.tgz.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
export SHAKESPEARE_INPUT=$PWD/.gpu_data/input.txt
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
LIMIT=${LIMIT:-585}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
c() {  # c NAME SECONDS command...: one check script, its exit status and last lines
  local name=$1 limit=$2; shift 2
  timeout -s SIGABRT $(rem $limit) "$@" > $O/$name.log 2>&1
  echo "$name rc=$? $((SECONDS - t0)) s"; grep -E "PASSED|FAILED|WRONG|ERROR|HANG" $O/$name.log | head -6
}
t() {  # t NAME SECONDS "ENV=... ENV=..." pytest-args...: one pytest run, its last line and failures
  local name=$1 limit=$2 vars=$3; shift 3
  env $vars timeout -s SIGABRT $(rem $limit) python -m pytest -m gpu -q -p no:cacheprovider --tb=short "$@" > $O/$name.log 2>&1
  echo "$name rc=$? $(grep -E 'passed|failed' $O/$name.log | tail -1) $((SECONDS - t0)) s"; grep -E "^FAILED|^ERROR|Fatal" $O/$name.log | head -8
}
c check_attention_dropout 100 python dev/hopper/check_attention_dropout.py
tail -8 $O/check_attention_dropout.log
c check_attention_bwd 100 python dev/hopper/check_attention_bwd.py
tail -12 $O/check_attention_bwd.log
t attn 180 "" tests/attention
t families 80 "" tests/mlp tests/layernorm tests/classifier
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null
