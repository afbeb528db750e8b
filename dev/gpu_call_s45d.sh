#!/usr/bin/env bash
# Session 45 (~4 min, any card): the dQ fold's second version. s45a ran the first (dev/patches/
# attention_bwd_dq_fold.patch as session 44 left it): correct (537 GPU tests, sanitizers clean) but the D = 64
# backward took 683 / 847 / 2003 us instead of 190 / 254 / 288 (main + convert). Its helper loaded dq_accum one row
# at a time, each load waiting behind the previous row's store (64 L2 round trips a block), and fenced with
# __threadfence (MEMBAR.SC.GPU) once a post. Now (.vfold): four 16-byte loads before their stores, the posts taken
# in batches, counted by release atomics (MEMBAR.ALL.GPU), one acquire fence for a batch's completed blocks.
# .vfc: the same without the conversions (wrong dq; prices them).
#   1. main's backward outputs saved, .vfold's compared; a hang or mismatch ends the call.
#   2. per-kernel us (attention_bwd_pieces --time): main, .vfold, .vfc.
#   3. .vfold: the attention GPU tests; compute-sanitizer memcheck / racecheck on the small ragged cases.
# Then bash dev/gpu_call_s45e.sh on the same warm machine (timings).
# Prep: copies of HEAD with dev/patches/attention_bwd_dq_fold.patch (.vfold) and, in .vfc, the helper's
#   conversion loop removed; carry [".gpu_data", ".vfold", ".vfc"]
export MAX_JOBS=10 BUILD_ARGS=" " VARIANTS=".vfold .vfc" VARIANT_JOBS=4 LIMIT=${LIMIT:-580}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step save_main 60 python dev/attention_bwd_pieces.py --save /tmp/bwd_main.pt; tail -1 $O/save_main.log
(cd .vfold && step cmp_fold 60 python dev/attention_bwd_pieces.py --compare /tmp/bwd_main.pt); grep -E "compare|DIFF|NaN" $O/cmp_fold.log | head -6
for t in . .vfold .vfc; do
  (cd $t && step pieces_${t#.} 45 python dev/attention_bwd_pieces.py --time); echo "-- $t"; grep "^time" $O/pieces_${t#.}.log | head -4
done
if [ "$(grep -c '^compare: 14 of 14' $O/cmp_fold.log)" != 1 ]; then echo "FOLD BROKEN: skipping its suite"; tail -20 $O/cmp_fold.log; (cd $O && tar -czf logs.tgz *.log && rm -rf *.log); exit 3; fi
(cd .vfold && step t_att 200 python -m pytest -m gpu -q -p no:cacheprovider tests/attention -x); tail -1 $O/t_att.log
grep -E "^FAILED|^ERROR|Error" $O/t_att.log | head -8
sanitize .vfold 80 python dev/attention_bwd_pieces.py --small
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
