#!/usr/bin/env bash
# Branch s5-ln-cpp, its GPU verification (one call): the LayerNorm family's eager path with its autograd in
# C++ (csrc/bindings.cpp AddLayerNorm). Builds the layernorm family only, runs its GPU tests (the C++ path vs
# the custom-op path bitwise over the shape/dtype/option matrix, eager vs compiled, the float64 accuracy
# matrix, the GPT compile / training tests), the host timing of every eager path side by side
# (dev/layernorm_host.py), then bench/bench_layernorm.py plain (issue 10's timing: tk must be >= 2x the
# faster of eager and compile at (16384, 768)) and as CUDA-graph replays. Logs tarred into $OUT/logs.tgz.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions PYTHONFAULTHANDLER=1
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
LIMIT=${LIMIT:-580}
rem() { local r=$((LIMIT - SECONDS + t0)); [ $r -lt 1 ] && r=1; [ $r -lt $1 ] && echo $r || echo $1; }
python -m tk_kernels.build --family layernorm > $O/build.log 2>&1 || { echo "BUILD FAILED"; grep -E "error|failed" $O/build.log | head -30; }
echo "build $((SECONDS - t0)) s"
timeout $(rem 90) python dev/layernorm_host.py > $O/layernorm_host.log 2>&1; echo "layernorm_host rc=$?"; cat $O/layernorm_host.log
timeout $(rem 200) python -m pytest -m gpu -q -x -p no:cacheprovider tests/layernorm/test_layernorm_gpu.py > $O/layernorm_gpu.log 2>&1
echo "layernorm gpu tests rc=$? $(tail -1 $O/layernorm_gpu.log) $((SECONDS - t0)) s"; grep -E "^(FAILED|ERROR)|Error" $O/layernorm_gpu.log | head -10
timeout $(rem 200) python bench/bench_layernorm.py --impls tk,tk_ops,eager,compile --shapes 16384,768 16384,1024 16384,2048 \
  --json $O/bench_ln_plain.json > $O/bench_ln_plain.log 2>&1; echo "bench plain rc=$?"; cat $O/bench_ln_plain.log
timeout $(rem 90) python bench/bench_layernorm.py --graphs --impls tk,tk_ops,eager --shapes 16384,768 \
  --json $O/bench_ln_graphs.json > $O/bench_ln_graphs.log 2>&1; echo "bench graphs rc=$?"; cat $O/bench_ln_graphs.log
echo "total $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null
