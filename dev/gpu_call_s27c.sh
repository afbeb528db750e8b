#!/usr/bin/env bash
# Session 27: the issues' tables refreshed in one command's block of bench/RESULTS.md (bench/run_all.py, whose --merge
# lets a full run span two calls of the device's 10-minute limit), and the MLP family GEMM at the classifier's shapes.
#   bash dev/gpu_call_s27c.sh 1   build; dev/classifier_shapes_gemm.py; run_all: attention (CUDA graphs), dropout,
#                                 mlp, classifier, layernorm, layernorm_dropout                        (~8 min)
#   bash dev/gpu_call_s27c.sh 2   build (cached when the machine is still warm); run_all --merge: train with --profile
#                                 (gpt2, gpt2-medium; torch / tk; compile / graphs)                     (~7 min)
# Carry [".gpu_data"] (part 2 also carries the bench/RESULTS.md that part 1 brought back, committed in between).
# Back: the step logs, bench/RESULTS.md, and run_all's folder as one tar (the device returns at most 8 files).
export MAX_JOBS=16
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
if [ "$1" = 1 ]; then
  step shapes 70 python dev/classifier_shapes_gemm.py
  grep -E "logits|dx|dW" $O/shapes.log
  step runall 440 python bench/run_all.py --benches attention,dropout,mlp,classifier,layernorm,layernorm_dropout \
    --attention-args "--graphs --impls tk,cudnn,flash" --timeout 180 --out $PWD/bench/out/run_all
else
  step runall 470 python bench/run_all.py --benches train --merge --timeout 450 --out $PWD/bench/out/run_all \
    --train-args "--models gpt2,gpt2-medium --compile compile,graphs"
fi
grep -E "^== |rewrote" $O/runall.log
cp bench/RESULTS.md $O/RESULTS.md
tar -czf $O/run_all.tgz -C bench/out run_all
(cd bench && tar -czf $O/plots.tgz plots 2>/dev/null)
echo "all done at $((SECONDS - t0)) s"
