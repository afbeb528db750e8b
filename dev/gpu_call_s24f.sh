#!/usr/bin/env bash
# Session 24: issue 8's and issue 9's tables on main as of this session (the last full ones are session 17's,
# H200), with GPT-2 medium's (16,16,1024,64) added to bench_attention's shapes. Carry [".gpu_data"]. ~6 min.
export MAX_JOBS=16 BUILD_ARGS="--family attention"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step attn 330 python bench/bench_attention.py --graphs --impls tk,cudnn,flash --json $O/attention.json
tail -22 $O/attn.log
step drop 120 python bench/bench_attention_dropout.py --graphs --impls tk,cudnn,flash --json $O/dropout.json
tail -10 $O/drop.log
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
