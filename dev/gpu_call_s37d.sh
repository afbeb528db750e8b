#!/usr/bin/env bash
# Session 37, after merging the dQ^T vector reductions (main): on an H200, every open target on main
# (gpu_call_s36b.sh); elsewhere (~7 min) the prep zero fill on top of it, .vzf2 = main +
# dev/patches/attention_bwd_prep_zero_fill.patch (s37b on the staged main: prep 56.7 + ATen fill 40.2 -> 91.0 us at
# (8,16,2048,128), GPT-2's causal backward 232 -> 237 TFLOP/s): pytest -m gpu tests/attention in .vzf2 (main's
# kernels plus the prep change), memcheck of its small cases, bench_attention main / .vzf2 twice, GPT-2's step
# (train_abab).
# Prep: rm -rf .vzf2 && mkdir .vzf2 && git archive HEAD | tar -x -C .vzf2 &&
#       (cd .vzf2 && patch -p1 < ../dev/patches/attention_bwd_prep_zero_fill.patch); carry [".gpu_data", ".vzf2"].
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then exec bash dev/gpu_call_s36b.sh; fi
export MAX_JOBS=8 VARIANTS=".vzf2" VARIANT_BUILD_ARGS=" " VARIANT_JOBS=8 LIMIT=${LIMIT:-585}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vzf2 && step t_att 200 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_att.log
grep "^FAILED" $O/t_att.log | head -5
(cd .vzf2 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step san_memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 9 \
   python dev/attention_bwd_pieces.py --save /tmp/san.pt --small); grep "ERROR SUMMARY" $O/san_memcheck.log
ba() {  # ba TREE TAG
  (cd $1 && step ba_$2 45 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn --json $(cd $O && pwd)/ba_$2.json)
  for p in fwd bwd; do echo "-- $2 $p: $(grep '^| (' $O/ba_$2.log | grep $p | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"; done
}
ba . main1; ba .vzf2 zf1; ba . main2; ba .vzf2 zf2
train_abab .vzf2
(cd $O && tar -czf logs.tgz *.log *.json && rm -rf *.log *.json train_*)
echo "all done at $((SECONDS - t0)) s"
