#!/usr/bin/env bash
# Session 38, third call (issue 8; right after gpu_call_s38b.sh, on its machine): the per-warp bulk reductions of
# the dQ^T partials at D = 64 too.
#   .vpw2 = .vpw + dev/patches/attention_bwd_dq_warp_bulk_d64.patch: STAGED_DQ at both D (D = 64: an 8 KB frag64 half
#           block per consumer, 4 runs of 512 B a warp; 179 KB of shared memory), spill-free.
# Steps: outputs against main; bench_attention --graphs --rounds 2 --impls tk,cudnn at the D = 64 shapes, main / .vpw /
# .vpw2 twice alternated; all of .vpw2's attention GPU tests (its D = 128 code is .vpw's); memcheck / racecheck.
# Prep: as gpu_call_s38b.sh, then cp -r .vpw .vpw2 && (cd .vpw2 && patch -p1 < ../dev/patches/attention_bwd_dq_warp_bulk_d64.patch)
# carry [".gpu_data", ".vpw", ".vpw2"]
export MAX_JOBS=8 BUILD_ARGS="--family attention" VARIANTS=".vpw .vpw2" VARIANT_JOBS=4 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step ref 40 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
(cd .vpw2 && step cmp 40 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -3 $O/cmp.log
S="16,12,1024,64;16,16,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
ba() {  # ba TREE TAG
  (cd $1 && step ba_$2 40 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn --shapes "$S")
  echo "-- $2 bwd: $(grep '^| (' $O/ba_$2.log | grep bwd | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"
}
ba . main1; ba .vpw pw1; ba .vpw2 pwb1; ba . main2; ba .vpw pw2; ba .vpw2 pwb2
(cd .vpw2 && step t_att 200 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_att.log
grep "^FAILED" $O/t_att.log | head -5
sanitize .vpw2 50 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
