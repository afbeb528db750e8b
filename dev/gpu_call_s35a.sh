#!/usr/bin/env bash
# Session 35 (issues 8 / 12): session 34's two register-operand patches together, checked for merging.
#   .vkq = HEAD + dev/patches/attention_bwd_d64_kv_registers.patch + dev/patches/attention_fwd_d64_q_registers.patch
#   (s34h on an H100: backward +1..+7% at every D = 64 shape, dK / dV bitwise main's; forward +0..+2.4%)
# 1. GPT-2's tk step main / .vkq / main / .vkq (every family built in both trees); 2. bench_attention D = 64 both;
# 3. compute-sanitizer memcheck + racecheck on the small backward cases in .vkq; 4. tests/attention whole in .vkq.
# Prep: rm -rf .vkq && mkdir .vkq && git archive HEAD | tar -x -C .vkq && (cd .vkq && patch -p1 <
#   ../dev/patches/attention_bwd_d64_kv_registers.patch && patch -p1 < ../dev/patches/attention_fwd_d64_q_registers.patch)
#   Carry [".gpu_data", ".vkq"].
export MAX_JOBS=10 VARIANTS=".vkq" VARIANT_JOBS=6 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
D64="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
tk_step tr_main1; (cd .vkq && tk_step tr_kq1); tk_step tr_main2; (cd .vkq && tk_step tr_kq2)
for t in ". main" ".vkq kq"; do set -- $t
  (cd $1 && step ba_$2 40 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn --shapes "$D64")
  for p in fwd bwd; do echo "-- $2 $p: $(grep '^| (' $O/ba_$2.log | grep $p | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"; done
done
step ref_s 30 python dev/attention_bwd_pieces.py --save /tmp/ref_small.pt --small; tail -1 $O/ref_s.log
sanitize .vkq 90 python dev/attention_bwd_pieces.py --compare /tmp/ref_small.pt --small
(cd .vkq && step t_all 200 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_all.log
grep "^FAILED" $O/t_all.log | head -5
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log tr_*)
echo "all done at $((SECONDS - t0)) s"
