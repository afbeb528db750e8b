#!/usr/bin/env bash
# Session 43's first call (~6 min, any card): the forward's O stores (dev/patches/attention_fwd_o_store16.patch, .vst16):
# D = 128 p = 0 writes O from registers 16 bytes a lane (wg::store_rows: a quad transposes its words by 4 shuffles
# per 32 columns; 8 STG.E.128 a thread instead of 32 STG.E; session 42's phase stamps put the old finish at 5-6% of an
# item at (8,16,2048,128) non-causal), the staged O (D = 64, D = 128 dropout) goes to shared memory by stmatrix (4 / 8
# STSM a thread instead of 16 / 32 STS). Compiled spill-free, no C75xx (session 42); never run.
# Steps: bench_attention main / .vst16 (both masks, --rounds 2; forward and backward lines), .vst16's attention GPU
# suite, racecheck + memcheck of its forward / backward pieces (--small), the benchmarks again in the reverse order,
# GPT-2's tk step alternated .vst16 / main.
# Prep: rm -rf .vst16 && mkdir .vst16 && git archive HEAD | tar -x -C .vst16 && (cd .vst16 && patch -p1 < ../dev/patches/attention_fwd_o_store16.patch)
#   carry [".gpu_data", ".vst16"]
export MAX_JOBS=10 BUILD_ARGS=" " VARIANTS=".vst16" VARIANT_JOBS=6 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-420}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
baf() { ba "$@"; echo "-- $2 fwd: $(grep '^| (' $O/ba_$2.log | grep fwd | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"; }
baf . main1; baf .vst16 st1
(cd .vst16 && step t_attn 100 python -m pytest -m gpu -q -p no:cacheprovider tests/attention -x); tail -1 $O/t_attn.log
grep "^FAILED" $O/t_attn.log | head -5
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in racecheck memcheck; do
  (cd .vst16 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step $tool 40 $cs --tool $tool --error-exitcode 9 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small)
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $O/$tool.log
done
baf .vst16 st2; baf . main2
(cd .vst16 && tk_step train_b); tk_step train_c; (cd .vst16 && tk_step train_d); tk_step train_e
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log train_*)
echo "all done at $((SECONDS - t0)) s"
