#!/usr/bin/env bash
# Session 30's fourth call: s30c's checks again with the baseline's copy of the script (s30c's .vbase lacked it),
# and the fixed stale tests:
#   1. dqkv bitwise against .vbase (dev/attention_bwd_pieces.py, 11 cases), memcheck on the small cases;
#   2. the three tests/attention/test_attention_qkv_gpu.py tests that s30c failed (stale since the projections
#      went to tk::linear_bwd, session 25, and since delta_bias's proj_bias=, session 30), fixed;
#   3. the pieces timed in both trees, alternated (--time: new, base, new, base);
#   4. GPT-2 medium's step (24 layers), alternated: torch + tk here, tk in .vbase, here, .vbase.
# Prep: rm -rf .vbase && mkdir .vbase && git archive HEAD | tar -x -C .vbase && cp dev/attention_bwd_pieces.py
#   .vbase/dev/. Carry [".gpu_data", ".vbase"].
export MAX_JOBS=8 VARIANTS=".vbase" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-400}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vbase && step pieces_save 60 python dev/attention_bwd_pieces.py --save /tmp/base.pt); tail -1 $O/pieces_save.log
step pieces_compare 60 python dev/attention_bwd_pieces.py --compare /tmp/base.pt; tail -12 $O/pieces_compare.log
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(cd .vbase && python dev/attention_bwd_pieces.py --small --save /tmp/base_small.pt > /dev/null 2>&1)
PYTORCH_NO_CUDA_MEMORY_CACHING=1 step san_memcheck 90 $cs --tool memcheck --error-exitcode 9 python dev/attention_bwd_pieces.py --small --compare /tmp/base_small.pt
grep -E "ERROR SUMMARY|^compare" $O/san_memcheck.log
step qkv_tests 90 python -m pytest -m gpu -q -p no:cacheprovider tests/attention/test_attention_qkv_gpu.py -k \
  "reads_dqkv_in_place or bitwise_the_views_model"; tail -1 $O/qkv_tests.log
for r in 1 2; do
  step time_new$r 40 python dev/attention_bwd_pieces.py --time; grep "^time" $O/time_new$r.log
  (cd .vbase && step time_base$r 40 python dev/attention_bwd_pieces.py --time); grep "^time" $O/time_base$r.log
done
med() { step $1 90 python bench/bench_train.py --models gpt2-medium --kernels $2 --compile graphs --out $O/$1; grep "tok/s" $O/$1.log | head -2; }
med med_a torch,tk; (cd .vbase && med med_b tk); med med_c tk; (cd .vbase && med med_d tk)
(cd $O && tar -czf med.tgz med_? && rm -rf med_?)
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)  # the device returns at most 8 files
echo "all done at $((SECONDS - t0)) s"
