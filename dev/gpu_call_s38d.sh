#!/usr/bin/env bash
# Session 38, the call that fits the device time left after six failed starts (~7 min): .vmerge alone beside main.
#   .vmerge = main + dev/patches/attention_bwd_dq_staged_tma.patch: the .vpt of gpu_call_s38b.sh (it never ran; both
#            in git history, 24fcb4e) (lse2 / Delta read early; at D = 128 the dQ^T partials staged in shared memory and added by one tensor reduce-add per warp
#            and block) with its code tidied for merging (the D = 64 path's address shared, the unused dq_head gone)
# Steps: outputs against main; bench_attention --graphs --rounds 2 --impls tk,cudnn, main / .vmerge twice alternated;
# .vmerge's attention GPU tests; memcheck / racecheck (cut short if the call's time is up).
# Prep: rm -rf .vmerge && mkdir .vmerge && git archive HEAD | tar -x -C .vmerge &&
#   (cd .vmerge && git show 24fcb4e:dev/patches/attention_bwd_dq_staged_tma.patch | patch -p1); carry [".gpu_data", ".vmerge"]
export MAX_JOBS=8 BUILD_ARGS="--family attention" VARIANTS=".vmerge" VARIANT_JOBS=8 LIMIT=${LIMIT:-430}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step ref 30 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
(cd .vmerge && step cmp 30 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -3 $O/cmp.log
ba . main1; ba .vmerge pt1; ba . main2; ba .vmerge pt2
(cd .vmerge && step t_att 150 python -m pytest -m gpu -q -p no:cacheprovider -x tests/attention); tail -1 $O/t_att.log
grep "^FAILED" $O/t_att.log | head -5
sanitize .vmerge 40 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
