#!/usr/bin/env bash
# Session 42: the causal forward's half diagonal tile (main's working tree: consumer 0 computes only keys 0..63 of
# the diagonal tile, which its 64 rows see; S m64n64, softmax over 64 columns, P V in 4 k-steps) against .vbase (the
# same tree with HEAD's hopper_forward.cu). The attention GPU suite, memcheck / racecheck of the forward + backward
# pieces, the causal forwards alternated (bench_attention --graphs --causal true), GPT-2's tk step alternated.
# Prep: rm -rf .vbase && mkdir .vbase && git ls-files | tar -cf - -T - | tar -x -C .vbase &&
#   cp tk_kernels/families/attention/csrc/hopper_backward.cu .vbase/tk_kernels/families/attention/csrc/ &&
#   git show HEAD:tk_kernels/families/attention/csrc/hopper_forward.cu > .vbase/tk_kernels/families/attention/csrc/hopper_forward.cu
#   carry [".gpu_data", ".vbase"]
export MAX_JOBS=10 BUILD_ARGS=" " VARIANTS=".vbase" VARIANT_JOBS=6 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-380}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
bc() {
  local shapes="16,12,1024,64;16,16,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64;8,16,2048,128;4,16,4096,128;2,16,8192,128;1,16,16384,128"
  (cd $1 && step bc_$2 40 python bench/bench_attention.py --graphs --causal true --shapes "$shapes" --impls tk,cudnn)
  echo "-- $2 fwd: $(grep '^| (' $O/bc_$2.log | grep fwd | awk -F'|' '{printf "%s %s/%s; ", $2, $5, $6}')"
}
bc . half1; bc .vbase base1
step t_attn 90 python -m pytest -m gpu -q -p no:cacheprovider tests/attention -x; tail -1 $O/t_attn.log; grep "^FAILED" $O/t_attn.log | head -5
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in racecheck memcheck; do
  PYTORCH_NO_CUDA_MEMORY_CACHING=1 step $tool 40 $cs --tool $tool --error-exitcode 9 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $O/$tool.log
done
bc .vbase base2; bc . half2
tk_step train_b; (cd .vbase && tk_step train_c); tk_step train_d; (cd .vbase && tk_step train_e)
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log train_*)
echo "all done at $((SECONDS - t0)) s"
