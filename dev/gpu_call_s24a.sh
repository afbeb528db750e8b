#!/usr/bin/env bash
# Prepared in session 23 (its device time ran out): the A/B the prep-zeroing patch never got, and, on an H200, the
# issues' own figures after session 23's merges (cluster pairs, optimizer family).
#   main = HEAD;  .vpz = HEAD + dev/patches/attention_prep_zeroes_dq.patch (the Hopper backward's prep kernel zeroes
#   dq_accum; 277 attention GPU tests passed on it in s23e)
# Prep: rm -rf .vpz && mkdir .vpz && git archive HEAD | tar -x -C .vpz && (cd .vpz && patch -p1 < ../dev/patches/attention_prep_zeroes_dq.patch)
# Carry [".gpu_data", ".vpz"]. ~9 min.
export MAX_JOBS=8 VARIANTS=".vpz" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
# GPT-2 step: torch, then main / .vpz alternated (A/B/A/B), each its own process
train_abab .vpz
# session 24: the full kernel list of main's tk step (what the 'other' / 'elementwise' / 'fused' families hold)
step prof 110 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --profile --top 120 --out $O/prof
grep -A14 "op family" $O/prof.log
# on an H200 only: issue 11's table and the optimizer step (on an H100 session 23 measured both)
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  step mlp 100 python bench/bench_mlp.py --json $O/mlp.json; tail -22 $O/mlp.log
  step optim 40 python dev/optim_step.py --model gpt2; tail -9 $O/optim.log
fi
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json train_* 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
