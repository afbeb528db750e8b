#!/usr/bin/env bash
# Session 43's third call (~8 min): main's working tree = HEAD + dev/patches/attention_fwd_o_store16.patch (session
# 43's s43a: D = 128 forward +0.6% to +5.1%, D = 64 level) against .vbase (HEAD). The attention GPU suite on the
# patched tree, racecheck + memcheck of the forward / backward pieces, GPT-2's tk step alternated (B A B A), then
# bench_mlp's GEMM table with GPT-2 medium's shapes added (the GELU GEMMs at C = 1024).
# Prep: rm -rf .vbase && mkdir .vbase && git archive HEAD | tar -x -C .vbase; carry [".gpu_data", ".vbase"]
export MAX_JOBS=10 BUILD_ARGS=" " VARIANTS=".vbase" VARIANT_JOBS=6 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step t_attn 200 python -m pytest -m gpu -q -p no:cacheprovider tests/attention -x; tail -1 $O/t_attn.log; grep "^FAILED" $O/t_attn.log | head -5
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in racecheck memcheck; do
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 step $tool 40 $cs --tool $tool --error-exitcode 9 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $O/$tool.log
done
tk_step train_b; (cd .vbase && tk_step train_c); tk_step train_d; (cd .vbase && tk_step train_e)
step mlp 100 python bench/bench_mlp.py --json $O/bench_mlp.json; grep -E "^ *(x W|dy|\+gelu|[0-9])" $O/mlp.log | head -40
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log train_*)
echo "all done at $((SECONDS - t0)) s"
