#!/usr/bin/env bash
# Session 27: the issues' tables refreshed in one command's block of bench/RESULTS.md (bench/run_all.py, whose --merge
# lets a full run span two calls of the device's 10-minute limit), and the MLP family GEMM at the classifier's shapes.
#   bash dev/gpu_call_s27c.sh 1   build; dev/classifier_shapes_gemm.py; run_all: attention (CUDA graphs), dropout,
#                                 mlp, classifier, layernorm, layernorm_dropout                        (~8 min)
#   bash dev/gpu_call_s27c.sh 2   build (cached when the machine is still warm) beside .vdsb's attention family;
#                                 issue 9: the backward-only causal Philox skip (.vdsb = main +
#                                 dev/patches/attention_dropout_causal_skip_bwd.patch), its GPU tests and the dropout
#                                 overhead alternated with main; then run_all --merge: train with --profile
#                                 (gpt2, gpt2-medium; torch / tk; compile / graphs)                     (~8.5 min)
# Carry [".gpu_data"]; part 2 also [".vdsb"] (prep: rm -rf .vdsb && mkdir .vdsb && git archive HEAD | tar -x -C
# .vdsb && (cd .vdsb && patch -p1 < ../dev/patches/attention_dropout_causal_skip_bwd.patch)), and the
# bench/RESULTS.md that part 1 brought back, committed in between.
# Back: the step logs, bench/RESULTS.md, and run_all's folder as one tar (the device returns at most 8 files).
export MAX_JOBS=16
[ "$1" = 2 ] && export MAX_JOBS=8 VARIANTS=".vdsb" VARIANT_JOBS=8 VARIANT_BUILD_ARGS="--family attention"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
if [ "$1" = 1 ]; then
  step shapes 70 python dev/classifier_shapes_gemm.py
  grep -E "logits|dx|dW" $O/shapes.log
  step runall 440 python bench/run_all.py --benches attention,dropout,mlp,classifier,layernorm,layernorm_dropout \
    --attention-args "--graphs --impls tk,cudnn,flash" --timeout 180 --out $PWD/bench/out/run_all
else
  (cd .vdsb && step drop_tests 100 python -m pytest -m gpu -q -x -p no:cacheprovider tests/attention/test_attention_dropout_gpu.py -k "hopper or same_mask")
  tail -1 $O/drop_tests.log
  ab() { step $1 45 python bench/bench_attention_dropout.py --graphs --impls tk; grep -E "^[0-9]|overhead" $O/$1.log | head -4; }
  ab drop_a; (cd .vdsb && ab drop_b); ab drop_c; (cd .vdsb && ab drop_d)
  step runall 400 python bench/run_all.py --benches train --merge --timeout 390 --out $PWD/bench/out/run_all \
    --train-args "--models gpt2,gpt2-medium --compile compile,graphs"
fi
grep -E "^== |rewrote" $O/runall.log
cp bench/RESULTS.md $O/RESULTS.md
tar -czf $O/run_all.tgz -C bench/out run_all
(cd bench && tar -czf $O/plots.tgz plots 2>/dev/null)
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)  # the device returns at most 8 files
echo "all done at $((SECONDS - t0)) s"
