#!/usr/bin/env bash
# Session 35 (issues 8 / 12), last ~370 s of device time: dQ^T's A operand (K^T) from registers in the D = 64 backward.
#   .vkt  = HEAD + dev/patches/attention_bwd_d64_kt_registers.patch: every D = 64 instance (causal spills 80 bytes)
#   .vkt2 = HEAD + dev/patches/attention_bwd_d64_kt_registers_noncausal.patch: non-causal only (spill-free)
#   By arithmetic each SS m64n32k16 of dQ^T reads 3 KB in 16 tensor cycles (192 B a cycle against the shared
#   memory's 128); RS reads 1 KB. 1. bench D = 64 main / .vkt / .vkt2; 2. memcheck on the small cases in .vkt2;
#   3. the Hopper backward's GPU tests in .vkt2 and attention_bwd_pieces --compare against main.
# Prep: for (T, P) in (.vkt, attention_bwd_d64_kt_registers) (.vkt2, attention_bwd_d64_kt_registers_noncausal):
#   rm -rf T && mkdir T && git archive HEAD | tar -x -C T && (cd T && patch -p1 < ../dev/patches/P.patch).
#   Carry [".gpu_data", ".vkt", ".vkt2"].
export MAX_JOBS=8 BUILD_ARGS="--family attention" VARIANTS=".vkt .vkt2" VARIANT_JOBS=4 LIMIT=${LIMIT:-250}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
D64="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64"
for t in ". main" ".vkt kt" ".vkt2 kt2"; do set -- $t
  (cd $1 && step ba_$2 40 python bench/bench_attention.py --graphs --rounds 2 --impls tk,cudnn --shapes "$D64")
  echo "-- $2 bwd: $(grep '^| (' $O/ba_$2.log | grep bwd | awk -F'|' '{printf "%s%s %s/%s; ", $2, $3, $5, $6}')"
done
step ref_s 30 python dev/attention_bwd_pieces.py --save /tmp/ref_small.pt --small
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(cd .vkt2 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step san_memcheck 40 "$cs" --tool memcheck --error-exitcode 9 python \
   dev/attention_bwd_pieces.py --compare /tmp/ref_small.pt --small); grep "ERROR SUMMARY" $O/san_memcheck.log
step ref 40 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt
(cd .vkt2 && step cmp 40 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -1 $O/cmp.log
(cd .vkt2 && step t_kt2 100 python -m pytest -m gpu -q -p no:cacheprovider tests/attention/test_attention_hopper_bwd_gpu.py \
   tests/attention/test_attention_qkv_gpu.py); tail -1 $O/t_kt2.log; grep "^FAILED" $O/t_kt2.log | head -3
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
