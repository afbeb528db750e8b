#!/usr/bin/env bash
# Prepared in session 26 (no device was lent that session): the fused classifier's prototype, checked and timed in one
# call before anything of it goes into the family (dev/README, "Leads after session 26").
#   1. dev/hopper/check_classifier_fused.py: builds dev/hopper/classifier_fused.cu (its own extension, ~1 min with 16
#      jobs), checks loss / dx / dw of the fused chunk loop against float64 (bf16 and fp16, ragged N / C / V, ignored
#      and repeated targets, one and several chunks) beside the family op's errors, then times the fused forward
#      against the family op and torch.compile at N = 16384, V = 50304, C = 768 / 1024, and one chunk launch by launch
#      beside the family's cuBLAS GEMMs and softmax kernel.
#   2. compute-sanitizer memcheck on the small checks (the prototype's first run on a GPU).
#   3. dev/hopper/check_gemm_ascale.py (the A-operand question alone, if time is left).
# Carry [".gpu_data"]. ~5 min.
export MAX_JOBS=16 BUILD_ARGS="--family classifier"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step fused 240 python dev/hopper/check_classifier_fused.py
grep -E "err|passed|Error|error|ms:|fwd\+grads" $O/fused.log | head -40
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
step fused_memcheck 120 "$cs" --tool memcheck --error-exitcode 9 python dev/hopper/check_classifier_fused.py --small
grep -E "ERROR SUMMARY|passed|Error" $O/fused_memcheck.log | head -5
step ascale 150 python dev/hopper/check_gemm_ascale.py
grep -E "passed|TFLOP|Error|error" $O/ascale.log | head -12
echo "all done at $((SECONDS - t0)) s"
