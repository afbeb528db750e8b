#!/usr/bin/env bash
# Session 34's first call (issue 8, then 12): dev/patches/attention_bwd_d64_dq_halves.patch in the tree .vdq beside
# main. The D = 64 Hopper backward's dQ^T: both consumers' dS^T halves behind a named barrier (as at D = 128), then
# consumer c computes all 64 head dims for queries 32c.. over all 128 keys (m64n32k16, the new N = 32 wgmma wrappers)
# and adds ONE 8 KB bulk reduction, instead of each consumer adding a 64 x 64 partial over its own keys (two 8 KB).
# Half the dq_accum reduce traffic (~2.3 TB/s of L2 reductions at (4,16,4096,64) non-causal, where ours is 0.88x
# cuDNN, s33g). Compiled on the CPU machine (session 33): no spills, 168 registers, D = 128 kernels' SASS unchanged,
# D = 64: UBLKRED 4 -> 2, HGMMA.64x64 40 -> 32 + 16 HGMMA.64x32, STS.128 16 -> 8, instructions -2.3% (non-causal bf16).
# dS^T's two buffers alternate with the CTA's running block count (not the item's), so that an item's first block
# never overwrites what the other consumer's dQ^T of the previous item's last block still reads.
# Never run. Unverified assumption: an MN-major 128B-swizzled B operand may start 64 bytes into its swizzle rows
# (dS^T's query columns 32..63), as the K-major k16 steps start 32-96 bytes in.
#   1. tests/attention whole in .vdq; 2. dev/attention_bwd_pieces.py --compare against main's outputs (dK, dV bitwise,
#   dQ to rounding), and under compute-sanitizer memcheck + racecheck (the small cases);
#   3. bench_attention.py --graphs --rounds 3 at the D = 64 shapes, main / .vdq / main / .vdq.
# Then gpu_call_s34b.sh: GPT-2's step A/B/A/B. Merge only if the tests, both sanitizers and the step agree.
# Prep: rm -rf .vdq && mkdir .vdq && git archive HEAD | tar -x -C .vdq && (cd .vdq && patch -p1 <
#   ../dev/patches/attention_bwd_d64_dq_halves.patch). Carry [".gpu_data", ".vdq"].
export MAX_JOBS=10 VARIANTS=".vdq" VARIANT_JOBS=6 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vdq && step t_attn 170 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_attn.log
grep "^FAILED" $O/t_attn.log | head
# dK, dV must be bitwise main's (untouched), dQ main's to float rounding (reduction order): all cases, then the small
# ones under the sanitizers
step ref 60 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
(cd .vdq && step cmp 60 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -12 $O/cmp.log
step ref_s 30 python dev/attention_bwd_pieces.py --save /tmp/ref_small.pt --small; tail -1 $O/ref_s.log
sanitize .vdq 60 python dev/attention_bwd_pieces.py --compare /tmp/ref_small.pt --small
D64="16,12,1024,64;16,16,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
for tree_tag in ".:main1" ".vdq:dq1" ".:main2" ".vdq:dq2"; do
  tree=${tree_tag%%:*}; tag=${tree_tag#*:}
  (cd $tree && step ba_$tag 60 python bench/bench_attention.py --graphs --rounds 3 --impls tk,cudnn --shapes "$D64")
  echo "-- $tag"; grep "^| (" $O/ba_$tag.log | grep bwd
done
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)
echo "all done at $((SECONDS - t0)) s"
