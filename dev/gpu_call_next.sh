#!/usr/bin/env bash
# Prepared at the end of session 5 for the next session's first GPU call: what main has that no GPU ran yet.
# The attention bindings' one backward_impl for both backward kernels (every attention GPU test), the
# shared support checks (tk_kernels/support.py: every family's GPU tests go through environment_reason), the
# stream-K removal (the MLP tests), train.py's stable .grad buffers under CUDA graphs with gradient accumulation
# (tests/train/test_cuda_graphs_gpu.py), the torchrun test (never finished on a GPU), and the attention matrix
# with both portable kernels forced (not re-run since its worst-row tolerance changed). Then the unmerged branches,
# each merged and checked on its own: s5-bwd-spill (the spill-free D=128 dropout backward:
# check_attention_dropout.py, the dropout GPU matrix), s5-attn-pipeline (the Hopper forward on the pipeline
# template: dev/hopper/check_attention.py, check_attention_dropout.py, pytest -m gpu tests/attention) and
# s5-bwd-pipeline (the backward on it, built on s5-bwd-spill: bring that back first with `git revert 81e3126`;
# dev/hopper/check_attention_bwd.py too).
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
  echo "$name rc=$? $(grep -E 'passed|failed' $O/$name.log | tail -1) $((SECONDS - t0)) s"; grep -E "^FAILED|^ERROR|Fatal" $O/$name.log | head -8
}
timeout -s SIGABRT $(rem 90) python dev/hopper/check_attention_dropout.py > $O/check_attention_dropout.log 2>&1
echo "check_attention_dropout rc=$? $((SECONDS - t0)) s"; tail -12 $O/check_attention_dropout.log
t attn 150 "" tests/attention
t attn_portable 60 "TK_ATTENTION_PATH=portable TK_ATTENTION_BWD=portable" tests/attention/test_attention_gpu.py
t families 90 "" tests/mlp tests/layernorm tests/classifier
t train 180 "" tests/train/test_cuda_graphs_gpu.py tests/train/test_torchrun_gpu.py
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null
