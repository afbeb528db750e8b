#!/usr/bin/env bash
# Branch s4-host-overhead, its GPU verification (one call): the host-overhead cuts of the tk ops' Python
# (attention: one stride pass and tma_ready once per operand, eager calls through _EagerAttention;
# layernorm: tensor_reason's cheap all-fine test; classifier: chunk views from split(); cached extension
# modules) change no kernel, so: every GPU test of the touched families (attention also with the portable
# paths forced, which the default run on an H200 does not take), the CUDA-graph train tests, the LayerNorm
# host timing, then the train step, torch vs tk, eager / compile / graphs (the numbers to compare with
# today's: tk 37.72 ms compiled, 32.52 ms graphs; torch 34.61 / 34.69). Logs tarred into $OUT/logs.tgz.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
LIMIT=${LIMIT:-580}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
t() {  # t NAME SECONDS "ENV=... ENV=..." pytest-args...: one pytest run, its last line
  local name=$1 limit=$2 vars=$3; shift 3
  env $vars timeout $(rem $limit) python -m pytest -m gpu -q -x -p no:cacheprovider "$@" > $O/$name.log 2>&1
  echo "$name rc=$? $(tail -1 $O/$name.log) $((SECONDS - t0)) s"
}
t attn 120 "" tests/attention/test_attention_gpu.py tests/attention/test_attention_hopper_bwd_gpu.py tests/attention/test_attention_dropout_gpu.py
t attn_portable 90 "TK_ATTENTION_PATH=portable TK_ATTENTION_BWD=portable" tests/attention/test_attention_gpu.py
t layernorm 60 "" tests/layernorm/test_layernorm_gpu.py
t classifier 60 "" tests/classifier/test_classifier_gpu.py
t graphs_model 120 "" tests/train/test_cuda_graphs_gpu.py tests/model
timeout $(rem 40) python dev/layernorm_host.py > $O/layernorm_host.log 2>&1; echo "layernorm_host rc=$?"; cat $O/layernorm_host.log
timeout -s SIGABRT $(rem 240) python bench/bench_train.py --models gpt2 --kernels torch,tk --compile eager,compile,graphs \
  --warmup 3 --iters 15 --out $O/train_gpt2 > $O/bench_train_gpt2.log 2>&1
echo "bench_train gpt2 rc=$? $((SECONDS - t0)) s"; grep -E "tok/s|ms|rror|x$" $O/bench_train_gpt2.log | head -12
cd $O && tar czf logs.tgz --exclude logs.tgz *.log train_* 2>/dev/null
