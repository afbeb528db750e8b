#!/usr/bin/env bash
# Session 34 (issues 8 / 12), three D = 64 Hopper attention patches beside main (HEAD), within a short budget:
#   .vkr  = HEAD + dev/patches/attention_bwd_d64_kv_registers.patch: S^T and dP^T take K_c, V_c from registers
#           (wgmma_rs, loaded once per item), so their m64n64k16 read only Q / dO from shared memory (the SS form
#           reads 4 KB in 32 tensor cycles: the shared memory's whole 128 B a cycle)
#   .vcv2 = HEAD + dev/patches/attention_bwd_d64_fused_convert.patch (second form: a counter per 32-query half, each
#           reduction waited for one reduction later with the staging double-buffered; dev/README, session 34)
#   .vqr  = HEAD + dev/patches/attention_fwd_d64_q_registers.patch: the forward's S = Q K^T with Q from registers
#           (loaded once per item; bench only)
# 1. bench_attention --graphs --rounds 2 --impls tk,cudnn at the D = 64 shapes (fwd + bwd printed: bwd changes)
# 2. GPT-2's tk step main / .vkr / .vqr / .vcv2 / main; 3. the Hopper backward's GPU tests (test_attention_hopper_bwd_gpu.py,
#    test_attention_qkv_gpu.py) in both trees, attention_bwd_pieces.py --compare against main;
# 4. compute-sanitizer memcheck + racecheck on the small cases, .vkr then .vcv2; 5. tests/attention whole in .vkr.
# Prep: for each (T, P) above, rm -rf T && mkdir T && git archive HEAD | tar -x -C T && (cd T && patch -p1 <
#   ../dev/patches/P). Carry [".gpu_data", ".vkr", ".vcv2", ".vqr"].
export MAX_JOBS=7 VARIANTS=".vkr .vcv2 .vqr" VARIANT_JOBS=3 LIMIT=${LIMIT:-590}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
D64="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
ba() {  # ba TREE TAG [PASS]
  (cd $1 && step ba_$2 40 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn --shapes "$D64")
  echo "-- $2: $(grep '^| (' $O/ba_$2.log | grep ${3:-bwd} | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"
}
ba . main; ba .vkr kr; ba .vcv2 cv2; ba .vqr qr fwd; echo "-- main fwd: $(grep '^| (' $O/ba_main.log | grep fwd | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"
tk_step tr_main1; (cd .vkr && tk_step tr_kr); (cd .vqr && tk_step tr_qr); (cd .vcv2 && tk_step tr_cv2); tk_step tr_main2
step ref 60 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
for v in vkr vcv2; do
  (cd .$v && step t_$v 90 python -m pytest -m gpu -q -p no:cacheprovider tests/attention/test_attention_hopper_bwd_gpu.py \
     tests/attention/test_attention_qkv_gpu.py); tail -1 $O/t_$v.log; grep "^FAILED" $O/t_$v.log | head -3
  (cd .$v && step cmp_$v 60 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -1 $O/cmp_$v.log
done
step ref_s 30 python dev/attention_bwd_pieces.py --save /tmp/ref_small.pt --small; tail -1 $O/ref_s.log
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for v in vkr vcv2; do
  for tool in memcheck racecheck; do
    (cd .$v && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step san_${tool}_$v 60 "$cs" --tool $tool --error-exitcode 9 python \
       dev/attention_bwd_pieces.py --compare /tmp/ref_small.pt --small)
    echo "$v $tool: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_${tool}_$v.log | head -1)"
  done
done
(cd .vkr && step t_all_vkr 150 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_all_vkr.log
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log tr_*)
echo "all done at $((SECONDS - t0)) s"
