#!/usr/bin/env bash
# Session 4, first GPU call (the lead's): build every family, then measure what session 3 left unmeasured:
# the train step with the current kernels (GPT-2 124M, compile, per-family profile), the Hopper attention
# variants, LayerNorm as CUDA-graph replays, the MLP tests + benchmark. Logs tarred into $OUT/logs.tgz.
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
python -c "import torch;print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version(), torch.cuda.get_device_name())"
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; tail -30 $O/build.log; }
echo "build $((SECONDS - t0)) s"
timeout 200 python bench/bench_train.py --models gpt2 --compile compile --profile --out $O/train > $O/bench_train.log 2>&1
echo "bench_train rc=$? $((SECONDS - t0)) s"; grep -vE "^\s*$" $O/bench_train.log | tail -45
timeout 60 python bench/bench_layernorm.py --graphs --json $O/bench_layernorm_graphs.json > $O/bench_layernorm_graphs.log 2>&1; tail -9 $O/bench_layernorm_graphs.log
echo "ln $((SECONDS - t0)) s"
timeout 80 python -m pytest -m gpu -q tests/mlp > $O/mlp_tests.log 2>&1; echo "mlp tests: $(tail -1 $O/mlp_tests.log) $((SECONDS - t0)) s"
timeout 80 python bench/bench_mlp.py --json $O/bench_mlp.json --profile > $O/bench_mlp.log 2>&1; tail -40 $O/bench_mlp.log
echo "mlp $((SECONDS - t0)) s"
timeout $((590 - SECONDS + t0 > 30 ? 580 - SECONDS + t0 : 30)) python dev/hopper/check_attention.py --quick > $O/check_attention.log 2>&1; echo "check_attention rc=$? $((SECONDS - t0)) s"
grep -E "CHECKS|FAIL|WRONG" $O/check_attention.log | head; tail -40 $O/check_attention.log
grep -h "^FAILED" $O/*tests.log | head -20
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json train 2>/dev/null
