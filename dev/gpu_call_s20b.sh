#!/usr/bin/env bash
# Prepared in session 19 (no GPU lent after the session's second call): the D = 64 attention's dropout bits drawn on
# the producer warpgroup's idle warps ("bit warps"), compiled and SASS-checked on the CPU machine only, never run.
# Session 10 measured a similar design 2x slower in the forward (dev/README.md, "Leads after session 19" says what
# differs), so the split variant is timed beside it.
#   main      = HEAD
#   .variant3 = HEAD + dev/patches/mlp_epilogue_warps.patch (tk::pipeline's P::helper, with the DYNAMIC walk's
#               records) + dev/patches/attention_fwd_bit_warps.patch (the forward's HopBitHelper draws all 8 Philox
#               calls of every lane: consumer tile loop 1269 -> 734 SASS instructions, helper 24 calls a tile max)
#   .variant4 = .variant3 + dev/patches/attention_bwd_bit_warps.patch (the backward's HbBitHelper: consumer block loop
#               970 -> 704; producer warpgroup 72, consumers 216)
#   .variant5 = .variant4 + dev/patches/attention_fwd_bit_warps_split.patch (the forward's calls split: the consumer
#               lanes draw 16-key steps 0, 1, the bit warps 2, 3: consumer tile loop 1039, helper 12 calls a tile max)
# Prep (CPU machine):
#   rm -rf .variant3 .variant4 .variant5 && for v in .variant3 .variant4 .variant5; do mkdir $v && \
#     git archive HEAD | tar -x -C $v && git apply --directory=$v dev/patches/mlp_epilogue_warps.patch && \
#     git apply --directory=$v dev/patches/attention_fwd_bit_warps.patch; done && \
#   git apply --directory=.variant4 dev/patches/attention_bwd_bit_warps.patch && \
#   git apply --directory=.variant5 dev/patches/attention_bwd_bit_warps.patch && \
#   git apply --directory=.variant5 dev/patches/attention_fwd_bit_warps_split.patch
# Carry [".gpu_data", ".variant3", ".variant4", ".variant5"]. Merge the fastest correct variant (tests pass,
# sanitizers clean) if it beats main; then `gpu_call_s20c.sh` runs the flagship seeds on it.
export MAX_JOBS=4 VARIANTS=".variant3 .variant4 .variant5" VARIANT_JOBS=4 VARIANT_BUILD_ARGS=" "  # all families: test_attention_gpu.py trains a compiled GPT
export BUILD_ARGS="--family attention"
source dev/gpu_call_lib.sh
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
# smoke first (the bit warps have never run: a hang here costs 60 s, not the whole call)
for v in .variant4 .variant5; do
  (cd $v && step smoke$v 60 python bench/sanitize_attention.py --paths hopper --batch 1 --heads 24 \
     --seqlens 300,1100 --head-dims 64 --dtypes bf16 --dropout 0.2) || echo "SMOKE FAILED $v"
done
if ! grep -q "forward+backward cases" $O/smoke.variant4.log && ! grep -q "forward+backward cases" $O/smoke.variant5.log; then
  echo "the bit warps do not run: stopping"; tail -5 $O/smoke.variant4.log; cd $O && tar czf logs.tgz *.log; exit 0
fi
A="tests/attention/test_attention_dropout_gpu.py tests/attention/test_attention_gpu.py tests/attention/test_attention_hopper_bwd_gpu.py"
for v in .variant4 .variant5; do
  (cd $v && step tests$v 300 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf $A) &
done
san() {  # tree tool: causal and not, D = 64, p = 0.2, 24 heads: at T = 1100 216 items (CTAs walk on, on the
         # counter), at T = 300 72 (the static order of the same walk)
  (cd $1 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 280) $cs --tool $2 --error-exitcode 9 python \
     bench/sanitize_attention.py --paths hopper --batch 1 --heads 24 --seqlens 300,1100 --head-dims 64 --dtypes bf16 \
     --dropout 0.2 > $O/san_$2$1.log 2>&1
   echo "== $2 $1 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_$2$1.log)")
}
san .variant4 memcheck & san .variant4 racecheck & san .variant4 synccheck & san .variant5 racecheck &
wait; echo "correctness done at $((SECONDS - t0)) s"
for v in .variant4 .variant5; do echo "tests$v: $(tail -1 $O/tests$v.log)"; grep -E "^FAILED|^ERROR" $O/tests$v.log | head -10; done
b() { (cd $1 && step drop_$2 60 python bench/bench_attention_dropout.py --graphs --impls tk,cudnn,flash --json $O/drop_$2.json)
      echo "-- $2"; tail -6 $O/drop_$2.log; }
b . main; b .variant3 fwdbits; b .variant4 bits; b .variant5 split; b . main2; b .variant4 bits2; b .variant5 split2
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
