#!/usr/bin/env bash
# Session 43's first call (~7 min, any card): two forward candidates for issue 8, alone and together. Both compiled
# spill-free with no C75xx in session 42; never run.
#   .vst16 = dev/patches/attention_fwd_o_store16.patch: D = 128 p = 0 writes O from registers 16 bytes a lane
#            (wg::store_rows: a quad transposes its words, 4 shuffles per 32 columns; 8 STG.E.128 a thread instead
#            of 32 STG.E); the staged O (D = 64, D = 128 dropout) goes to shared memory by stmatrix (4 / 8 STSM a
#            thread instead of 16 / 32 STS).
#   .vturn = dev/patches/attention_fwd_turn_d128.patch: the ping-pong turn runs on across items at D = 128 p = 0 too
#            (TURN_ACROSS_ITEMS), so consumer 0 starts the next item while consumer 1 stores O, instead of waiting
#            for it (session 42's phase stamps: the D = 128 finish is 2,282 / 2,910 cycles an item at (8,16,2048,128)
#            non-causal, 5-6% of the item).
#   .vboth = both patches.
# Steps: bench_attention (both masks, --rounds 2, tk and cuDNN; forward and backward lines) main / .vst16 / .vturn /
# .vboth, .vboth's attention GPU suite and racecheck + memcheck of its forward / backward pieces (--small), the four
# benchmarks again in the reverse order. Merge what wins (the headers say MEASUREMENT PENDING where the numbers go);
# then gpu_call_s43b.sh (GPT-2 and medium profiled, bench_mlp) on the warm machine, and GPT-2's tk step A/B.
# Prep: for t in .vst16 .vturn .vboth; do rm -rf $t && mkdir $t && git archive HEAD | tar -x -C $t; done;
#   (cd .vst16 && patch -p1 < ../dev/patches/attention_fwd_o_store16.patch);
#   (cd .vturn && patch -p1 < ../dev/patches/attention_fwd_turn_d128.patch);
#   (cd .vboth && patch -p1 < ../dev/patches/attention_fwd_o_store16.patch && patch -p1 < ../dev/patches/attention_fwd_turn_d128.patch)
#   carry [".gpu_data", ".vst16", ".vturn", ".vboth"]
export MAX_JOBS=4 BUILD_ARGS="--family attention" VARIANTS=".vst16 .vturn .vboth" VARIANT_JOBS=4 LIMIT=${LIMIT:-480}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
ba . main1; ba .vst16 st1; ba .vturn turn1; ba .vboth both1
(cd .vboth && step t_attn 100 python -m pytest -m gpu -q -p no:cacheprovider tests/attention -x); tail -1 $O/t_attn.log
grep "^FAILED" $O/t_attn.log | head -5
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in racecheck memcheck; do
  (cd .vboth && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step $tool 40 $cs --tool $tool --error-exitcode 9 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small)
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $O/$tool.log
done
ba .vboth both2; ba .vturn turn2; ba .vst16 st2; ba . main2
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
