#!/usr/bin/env bash
# Prepared in session 26 (no device was lent that session): the fused classifier in the family
# (dev/patches/classifier_fused_family.patch: csrc/fused.cu on tk::pipeline, ops.py's fused path on Hopper,
# TK_CLASSIFIER_FUSED=0/1 to force either; compiled for sm_80 and sm_90a without spills, never run). Run it after
# gpu_call_s27a.sh has shown the prototype correct (its bugs would be this one's too).
# Prep:
#   rm -rf .vcf && mkdir .vcf && git archive HEAD | tar -x -C .vcf && (cd .vcf && patch -p1 < ../dev/patches/classifier_fused_family.patch)
# Carry [".gpu_data", ".vcf"]. ~9 min:
#   1. the classifier GPU tests on the patched tree: every accuracy / memory / opcheck / compile / 50-step test on
#      both paths (the `path` fixture), stopping after 5 failures;
#   2. bench_classifier in the patched tree and on main (issue 10's table: ours vs eager vs torch.compile at
#      N = 16384, C = 768 / 1024, V = 50304, with the extra peak memory);
#   3. if the tests passed: GPT-2's step alternated, main / patched (train_abab).
export MAX_JOBS=8 VARIANTS=".vcf" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" "  # every family: the cache key holds the tree's path
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vcf && step cls_tests 240 python -m pytest -m gpu -q --maxfail=5 -p no:cacheprovider tests/classifier)
ok=$?
tail -4 $O/cls_tests.log
grep -E "^\[fused|^\[peak\]|^FAILED|Error" $O/cls_tests.log | head -30
(cd .vcf && step cls_bench_fused 90 python bench/bench_classifier.py --json $O/cls_bench_fused.json)
step cls_bench_main 90 python bench/bench_classifier.py --json $O/cls_bench_main.json
grep -E "C=|ms|x " $O/cls_bench_fused.log | head -8; grep -E "C=|ms|x " $O/cls_bench_main.log | head -8
[ $ok -eq 0 ] && train_abab .vcf
echo "all done at $((SECONDS - t0)) s"
