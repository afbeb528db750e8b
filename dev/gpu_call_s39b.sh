#!/usr/bin/env bash
# Session 39, the short form of gpu_call_s39a.sh (~7 min; after ~660 s of failed starts this session): the same trees
# (prep in s39a's header; carry [".gpu_data", ".vlf", ".vds", ".vboth"]), outputs against main, then
# bench_attention --graphs --rounds 2 --impls tk,cudnn main / .vboth / .vlf / .vds / main / .vboth. The winner's tests,
# sanitizers and GPT-2 step come in a second call (gpu_call_s39c.sh TREE) on the warm machine.
export MAX_JOBS=4 BUILD_ARGS="--family attention" VARIANTS=".vlf .vds .vboth" VARIANT_JOBS=4 LIMIT=${LIMIT:-480}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step ref 30 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
for t in .vlf .vds .vboth; do (cd $t && step cmp$t 30 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -1 $O/cmp$t.log; done
ba . main1; ba .vboth both1; ba .vlf lf1; ba .vds ds1; ba . main2; ba .vboth both2
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
