#!/usr/bin/env bash
# Prepared in session 19 (no GPU lent after the session's second call): the causal D = 64 attention's dropout bits
# drawn on the producer warpgroup's idle warps ("bit warps"), compiled and SASS-checked on the CPU machine only.
#   main      = HEAD
#   .variant3 = HEAD + dev/patches/mlp_epilogue_warps.patch (tk::pipeline's P::helper, here with the DYNAMIC walk's
#               records) + dev/patches/attention_fwd_bit_warps.patch (the forward's HopBitHelper: 256 units of 8
#               Philox calls a 128-key tile into a 4-slot ring; the consumer's per-tile loop 1269 -> 734 SASS
#               instructions, 622 without dropout)
#   .variant4 = .variant3 + dev/patches/attention_bwd_bit_warps.patch (the backward's HbBitHelper: 256 words a
#               64-query block; the consumer's per-block loop 970 -> 704; producer warpgroup 72, consumers 216)
# Prep (CPU machine):
#   rm -rf .variant3 .variant4 && mkdir .variant3 .variant4 && for v in .variant3 .variant4; do \
#     git archive HEAD | tar -x -C $v && git apply --directory=$v dev/patches/mlp_epilogue_warps.patch && \
#     git apply --directory=$v dev/patches/attention_fwd_bit_warps.patch; done && \
#   git apply --directory=.variant4 dev/patches/attention_bwd_bit_warps.patch
# Carry [".gpu_data", ".variant3", ".variant4"]. Merge if the attention GPU tests pass, the sanitizers are clean and
# the dropout fwd + bwd is faster (issue 9: overhead at p = 0.2 vs 0 <= 10%; it was +37.7% / +18.2%).
export MAX_JOBS=8 VARIANTS=".variant3 .variant4" VARIANT_JOBS=4 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# smoke first (the bit warps have never run: a hang here costs 60 s, not the whole call)
(cd .variant4 && step smoke.variant4 60 python bench/sanitize_attention.py --paths hopper --batch 1 --heads 24 \
   --seqlens 300,1100 --head-dims 64 --dtypes bf16 --dropout 0.2)
if [ $? != 0 ]; then echo "the bit warps do not run: stopping"; tail -5 $O/smoke.variant4.log; cd $O && tar czf logs.tgz *.log; exit 0; fi
A="tests/attention/test_attention_dropout_gpu.py tests/attention/test_attention_gpu.py tests/attention/test_attention_hopper_bwd_gpu.py"
(cd .variant4 && step tests_v4 300 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf $A) &
san() {  # tool: causal and not, D = 64, p = 0.2, 24 heads: at T = 1100 216 items (CTAs walk on, on the counter),
         # at T = 300 72 (the static order of the same walk)
  (cd .variant4 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 280) $cs --tool $1 --error-exitcode 9 python \
     bench/sanitize_attention.py --paths hopper --batch 1 --heads 24 --seqlens 300,1100 --head-dims 64 --dtypes bf16 \
     --dropout 0.2 > $O/san_$1.log 2>&1
   echo "== $1 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_$1.log)")
}
san memcheck & san racecheck & san synccheck &
wait; echo "correctness done at $((SECONDS - t0)) s"
echo "tests_v4: $(tail -1 $O/tests_v4.log)"; grep -E "^FAILED|^ERROR" $O/tests_v4.log | head -10
b() { (cd $1 && step drop_$2 60 python bench/bench_attention_dropout.py --graphs --impls tk,cudnn,flash --json $O/drop_$2.json)
      echo "-- $2"; tail -6 $O/drop_$2.log; }
b . main; b .variant3 fwdbits; b .variant4 bits; b . main2; b .variant3 fwdbits2; b .variant4 bits2
(cd .variant4 && step flagship_bits 150 python dev/timeline.py -- python train.py config/train_shakespeare_char.py \
   --kernels=tk --out_dir=$O/ck_bits)
grep -E "best val|launch to exit|step 5000|iter 5000" $O/flagship_bits.log | tail -4
cd $O && rm -rf ck_bits && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
