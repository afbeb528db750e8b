#!/usr/bin/env bash
# Session 30's third call: the Hopper attention backward's prep kernel with four rows a lane (loads first) and
# the dQ convert reading frag64 by 16-byte vectors (two queries x 16 dims a thread), in the working tree, beside
# .vbase (git archive HEAD, without them):
#   1. the backward's dqkv bitwise against .vbase (dev/attention_bwd_pieces.py: 11 cases, ragged, D 64 / 128,
#      causal or not, bf16 / fp16, dropout);
#   2. pytest -m gpu tests/attention here (the portable backward's convert lost its frag64 branch too);
#   3. compute-sanitizer memcheck on the small cases;
#   4. the pieces timed in both trees (--time), then GPT-2's step alternated (train_abab .vbase: new, base, ...).
# Prep: rm -rf .vbase && mkdir .vbase && git archive HEAD | tar -x -C .vbase. Carry [".gpu_data", ".vbase"].
export MAX_JOBS=8 VARIANTS=".vbase" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vbase && step pieces_save 60 python dev/attention_bwd_pieces.py --save /tmp/base.pt); tail -1 $O/pieces_save.log
step pieces_compare 60 python dev/attention_bwd_pieces.py --compare /tmp/base.pt; tail -12 $O/pieces_compare.log
step attn_tests 150 python -m pytest -m gpu -q -p no:cacheprovider tests/attention; tail -2 $O/attn_tests.log
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(cd .vbase && python dev/attention_bwd_pieces.py --small --save /tmp/base_small.pt > /dev/null 2>&1)
PYTORCH_NO_CUDA_MEMORY_CACHING=1 step san_memcheck 90 $cs --tool memcheck --error-exitcode 9 python dev/attention_bwd_pieces.py --small --compare /tmp/base_small.pt
grep -E "ERROR SUMMARY|^compare" $O/san_memcheck.log
step time_new1 40 python dev/attention_bwd_pieces.py --time; grep "^time" $O/time_new1.log
(cd .vbase && step time_base 40 python dev/attention_bwd_pieces.py --time); grep "^time" $O/time_base.log
train_abab .vbase
(cd $O && tar -czf train.tgz train_? && rm -rf train_?)
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)  # the device returns at most 8 files
echo "all done at $((SECONDS - t0)) s"
