#!/usr/bin/env bash
# Session 9, call A (~9 minutes): 1. the GPU tests whose helpers were refactored in session 8 (gpu_test_utils.capture,
# generator_state / rng_pair) and not re-run on a GPU since: attention dropout and qkv, LayerNorm dropout, MLP;
# 2. bench_attention.py --graphs (CUDA-graph replays: GPU time) at every shape, ours / flash / cuDNN (issue 8's
# table without the host-bound eager timing at (64,6,256,64)); 3. the dropout overhead, eager and --graphs (issue 9).
source dev/gpu_call_lib.sh
step tests 230 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/attention/test_attention_dropout_gpu.py \
  tests/attention/test_attention_qkv_gpu.py tests/layernorm/test_layernorm_dropout_gpu.py tests/mlp/test_mlp_gpu.py
tail -2 $O/tests.log; grep -E "^FAILED|^ERROR" $O/tests.log | head
step attn_graphs 170 python bench/bench_attention.py --graphs --impls tk,flash,cudnn --json $O/bench_attention_graphs.json
sed -n '/^| shape/,/^$/p' $O/attn_graphs.log
for mode in eager graphs; do
  flag=$([ $mode = graphs ] && echo --graphs)
  step dropout_$mode 60 python bench/bench_attention_dropout.py $flag --json $O/dropout_$mode.json
  grep -E "^\||overhead" $O/dropout_$mode.log | head -12
done
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null
