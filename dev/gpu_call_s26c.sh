#!/usr/bin/env bash
# Prepared in session 25: the fused classifier's open question, measured before any of it is written into the
# family (dev/README, "Leads after session 25"): does a GEMM whose A operand goes through registers with a per-(row,
# 256-column block) scale run as fast as the plain one? dev/hopper/check_gemm_ascale.py builds gemm_ascale.cu (its own
# extension, ~3 min on 2 cores here, ~40 s there), checks modes 0 (SS), 1 (RS), 2 (RS + scale per row: dx's form),
# 3 (A MN-major by ldmatrix.trans, scaled per K column: dW's form) against float64 at ragged shapes, then times them
# beside cuBLAS at (16384, 768, 4096), (2048, 768, 50176), (50176, 768, 2048), (16384, 3072, 768), 8192^3.
# If modes 2 and 3 are within ~3% of mode 0, write the classifier's dx / dW GEMMs this way (the plan in dev/README).
# Carry [".gpu_data"]. ~3 min.
export MAX_JOBS=16
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step ascale 240 python dev/hopper/check_gemm_ascale.py
grep -E "passed|TFLOP|Error|error" $O/ascale.log | head -12
echo "all done at $((SECONDS - t0)) s"
