#!/usr/bin/env bash
# Prepared in session 18 for the next GPU call (issues 11 / 12), compiled and SASS-checked on the CPU machine only.
#   main     = HEAD.
#   .variant = HEAD + dev/patches/pipeline_pieces_after_runs.patch: the pipeline template's deferred epilogue pieces
#              placed after the last slot of even runs (piece p after slot ceil((p + 1) iters / PIECES) - 1)
#              instead of after slots 0 .. PIECES - 1 back to back. At GPT-2's K = 768 (12 slots, 8 pieces) most
#              pieces then follow a slot without one, so two slices of MMAs are queued under them. s18e (Nsight
#              Compute): the GELU / GELU' GEMMs are latency-bound (issue slots 34-41% busy, tensor pipe 48% against
#              80% with the plain store), 0.18-0.19 ms against 0.11-0.12. ptxas -v: every instantiation 168
#              registers, 0 spills; SASS +0-0.9% instructions, the same HGMMA / UTMALDG / UTMASTG counts.
# Prep (CPU machine):
#   rm -rf .variant && mkdir .variant && git archive HEAD | tar -x -C .variant && \
#     git apply --directory=.variant dev/patches/pipeline_pieces_after_runs.patch
# Carry [".gpu_data", ".variant"]. Merge if tests pass, memcheck / racecheck are clean, and neither the GEMMs nor
# the GPT-2 step get slower; then fill in the patch's "Measured" line.
export MAX_JOBS=10 VARIANTS=".variant" VARIANT_JOBS=6 VARIANT_BUILD_ARGS=" "
source dev/gpu_call_lib.sh
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
(cd .variant && step tests_variant 240 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/model) &
# owed from session 18: the new many-items causal forward test at D = 128 on main's static-walk kernel
(step tests_attn_main 240 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/attention/test_attention_gpu.py) &
san() {  # tree tool: the four GEMMs of dev/mlp_epilogue_ncu.py at N = 2000 (192 tiles: CTAs take a second one, whose slots carry the first one's pieces; a ragged last tile), 12 launches
  (cd $1 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout $(rem 240) $cs --tool $2 --error-exitcode 9 python dev/mlp_epilogue_ncu.py \
     --ncu --small > $O/san_$2$1.log 2>&1
   echo "== $2 $1 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $O/san_$2$1.log)")
}
san .variant memcheck & san .variant racecheck & san . racecheck &
wait; echo "correctness done at $((SECONDS - t0)) s"
echo "tests_variant: $(tail -1 $O/tests_variant.log)"; grep -E "^FAILED|^ERROR" $O/tests_variant.log | head -10
echo "tests_attn_main: $(tail -1 $O/tests_attn_main.log)"; grep -E "^FAILED|^ERROR" $O/tests_attn_main.log | head -10
e() { (cd $1 && step epi_$2 40 python dev/mlp_epilogue_ncu.py); echo "-- $2"; cat $O/epi_$2.log | grep TFLOP; }
e . main; e .variant pieces; e . main2; e .variant pieces2
(step mlp_main 60 python bench/bench_mlp.py --skip-gemm --json $O/mlp_main.json); tail -6 $O/mlp_main.log
(cd .variant && step mlp_pieces 60 python bench/bench_mlp.py --skip-gemm --json $O/mlp_pieces.json); tail -6 $O/mlp_pieces.log
step train_main 120 python bench/bench_train.py --models gpt2 --kernels torch,tk --compile graphs --out $O/train_main
tail -4 $O/train_main.log
(cd .variant && step train_pieces 90 python bench/bench_train.py --models gpt2 --kernels tk --compile graphs --out $O/train_pieces)
tail -3 $O/train_pieces.log
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json train_main train_pieces 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
