#!/usr/bin/env bash
# Prepared in session 25 (no device time left to run it): issue 9's causal Philox skip,
# dev/patches/attention_dropout_causal_skip.patch, beside main. The Hopper dropout kernels skip the Philox calls
# of the 16-key groups the causal mask removes entirely (forward: the diagonal tile's groups past a warp pair's
# last row; backward: a warp's query groups wholly before its keys): ~8% of the calls at T = 1024, ~25% at T = 256.
# Outputs must be bitwise main's (the skipped elements have P = 0 either way).
#   .vds = HEAD + the patch
# Prep: rm -rf .vds && mkdir .vds && git archive HEAD | tar -x -C .vds && (cd .vds && patch -p1 < ../dev/patches/attention_dropout_causal_skip.patch)
# Carry [".gpu_data", ".vds"]. ~6 min.
export MAX_JOBS=8 BUILD_ARGS="--family attention" VARIANTS=".vds" VARIANT_JOBS=8
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
# correctness first: the dropout GPU matrix on the patched tree (float64 references built with the kernels' mask),
# and main vs patched outputs bitwise (dev/compare_saved.py is not needed: the test's same_mask cases cover it)
(cd .vds && step drop_tests 200 python -m pytest -m gpu -q -x -p no:cacheprovider tests/attention/test_attention_dropout_gpu.py)
tail -1 $O/drop_tests.log
# the overhead, fwd + bwd at p = 0.2 vs 0, CUDA graphs, main / patched alternated
ab() { step $1 60 python bench/bench_attention_dropout.py --graphs --impls tk; grep -E "tk|overhead" $O/$1.log | head -8; }
ab drop_a; (cd .vds && ab drop_b); ab drop_c; (cd .vds && ab drop_d)
echo "all done at $((SECONDS - t0)) s"
