#!/usr/bin/env bash
# Prepared in session 44 for session 45's first call (~8 min, any card): the dQ fold (dev/patches/
# attention_bwd_dq_fold.patch, branch s44-dq-fold: at D = 64 the Hopper backward converts each 64-query block of
# dq itself once its last reduction is in, two helper warps of the producer warpgroup, a counter per block; the
# bwd_dq_convert_kernel launch is gone there; compiled spill-free, never run). Its correctness first:
#   0. (session 45) main's backward outputs saved, the fold's compared (dK, dV bitwise, dQ to 1e-3): a hang or a
#      mismatch ends the call early.
#   1. .vfold: the attention GPU tests (all of them: every dq of the D = 64 Hopper path goes through the fold) and
#      the D = 64 qkv-bias test; compute-sanitizer memcheck / racecheck on the backward's small ragged cases.
#   2. per-kernel us of the backward (dev/attention_bwd_pieces.py --time), main and .vfold.
# Then bash dev/gpu_call_s45b.sh on the same warm machine (timings, train steps).
# Prep: rm -rf .vfold && mkdir .vfold && git archive HEAD | tar -x -C .vfold &&
#   (cd .vfold && patch -p1 < ../dev/patches/attention_bwd_dq_fold.patch); carry [".gpu_data", ".vfold"]
export MAX_JOBS=10 BUILD_ARGS=" " VARIANTS=".vfold" VARIANT_JOBS=6 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-570}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step save_main 60 python dev/attention_bwd_pieces.py --save /tmp/bwd_main.pt; tail -1 $O/save_main.log
(cd .vfold && step cmp_fold 60 python dev/attention_bwd_pieces.py --compare /tmp/bwd_main.pt); grep -E "compare|DIFF|NaN" $O/cmp_fold.log | head -6
if [ "$(grep -c '^compare: 14 of 14' $O/cmp_fold.log)" != 1 ]; then echo "FOLD BROKEN: skipping its suite"; tail -20 $O/cmp_fold.log; (cd $O && tar -czf logs.tgz *.log && rm -rf *.log); exit 3; fi
(cd .vfold && step t_att 260 python -m pytest -m gpu -q -p no:cacheprovider tests/attention -x); tail -1 $O/t_att.log
grep -E "^FAILED|^ERROR|Error" $O/t_att.log | head -8
sanitize .vfold 80 python dev/attention_bwd_pieces.py --small
step pieces_main 45 python dev/attention_bwd_pieces.py --time; grep "^time" $O/pieces_main.log | head -8
(cd .vfold && step pieces_fold 45 python dev/attention_bwd_pieces.py --time); grep "^time" $O/pieces_fold.log | head -8
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
