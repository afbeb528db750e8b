#!/usr/bin/env bash
# One GPU call (the lead's): build every family, the Hopper attention check, the GPU tests of the
# families that changed, and their benchmarks. Logs under $OUT (tarred into logs.tgz).
export PYTHONUNBUFFERED=1 MAX_JOBS=16 TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions
O=${OUT:-out}; mkdir -p $O
t0=$SECONDS
python -m tk_kernels.build > $O/build.log 2>&1 || { echo "BUILD FAILED"; tail -30 $O/build.log; }
echo "build $((SECONDS - t0)) s"
timeout 150 python dev/hopper/check_attention.py --quick > $O/check_attention.log 2>&1; echo "check_attention rc=$? $((SECONDS - t0)) s"
grep -E "CHECKS|FAIL|WRONG" $O/check_attention.log | head -20; tail -22 $O/check_attention.log
TK_ATTENTION_PATH=hopper timeout 120 python -m pytest -m gpu -q -x tests/attention/test_attention_gpu.py > $O/attn_hopper_tests.log 2>&1; echo "hopper attention tests: $(tail -1 $O/attn_hopper_tests.log) $((SECONDS - t0)) s"
timeout 100 python -m pytest -m gpu -q tests/layernorm > $O/ln_tests.log 2>&1; echo "layernorm tests: $(tail -1 $O/ln_tests.log) $((SECONDS - t0)) s"
timeout 60 python bench/bench_layernorm.py --json $O/bench_layernorm.json > $O/bench_layernorm.log 2>&1; tail -8 $O/bench_layernorm.log
timeout 100 python -m pytest -m gpu -q tests/attention/test_attention_dropout_gpu.py > $O/dropout_tests.log 2>&1; echo "dropout tests: $(tail -1 $O/dropout_tests.log) $((SECONDS - t0)) s"
timeout 60 python bench/bench_attention_dropout.py --json $O/bench_attention_dropout.json > $O/bench_dropout.log 2>&1; tail -9 $O/bench_dropout.log
grep -h "^FAILED" $O/*tests.log | head -20
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null
