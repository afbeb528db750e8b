#!/usr/bin/env bash
# Session 27's last call (~14 min of device time were left after two refused H200 starts): the most useful of
# gpu_call_s27c.sh's two parts in one call, in order of value, each step under its own time limit:
#   1. issue 9: the backward-only causal Philox skip (.vdsb = main + dev/patches/attention_dropout_causal_skip_bwd.patch;
#      prep as in gpu_call_s27c.sh), its Hopper dropout GPU tests, the dropout overhead alternated with main;
#   2. run_all: train (gpt2; torch / tk under CUDA graphs, profiled), then --merge: mlp;
#   3. dev/classifier_shapes_gemm.py (the MLP family GEMM at the classifier's shapes);
#   4. run_all --merge: attention (CUDA graphs; tk, cuDNN, flash), if time is left (LIMIT, default 450 s).
# Carry [".gpu_data", ".vdsb"]. 7.5 min at most (LIMIT=450: what device time was left had to cover the start too).
#   bash dev/gpu_call_s27d.sh skip   step 1 alone, only the attention family built (~2 min, LIMIT default 150)
export MAX_JOBS=8 VARIANTS=".vdsb" VARIANT_JOBS=8 VARIANT_BUILD_ARGS="--family attention"
if [ "$1" = skip ]; then export LIMIT=${LIMIT:-150} BUILD_ARGS="--family attention"; else export LIMIT=${LIMIT:-450}; fi
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
(cd .vdsb && step drop_tests 60 python -m pytest -m gpu -q -x -p no:cacheprovider tests/attention/test_attention_dropout_gpu.py -k "hopper or same_mask")
tail -1 $O/drop_tests.log
ab() { step $1 30 python bench/bench_attention_dropout.py --graphs --impls tk; grep -E "^[0-9]|overhead" $O/$1.log | head -4; }
ab drop_a; (cd .vdsb && ab drop_b); ab drop_c; (cd .vdsb && ab drop_d)
if [ "$1" != skip ]; then
  RA="python bench/run_all.py --out $PWD/bench/out/run_all"
  step runall_train 150 $RA --benches train --timeout 145 --train-args "--models gpt2 --compile graphs --top 40"
  step runall 80 $RA --benches mlp --merge --timeout 75
  step shapes 50 python dev/classifier_shapes_gemm.py
  grep -E "logits|dx|dW" $O/shapes.log
  step runall_attn 120 $RA --benches attention --merge --attention-args "--graphs --impls tk,cudnn,flash" --timeout 115
  grep -E "^== |rewrote" $O/runall*.log
  cp bench/RESULTS.md $O/RESULTS.md
  tar -czf $O/run_all.tgz -C bench/out run_all
fi
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)  # the device returns at most 8 files
echo "all done at $((SECONDS - t0)) s"
