#!/usr/bin/env bash
# Session 8's second GPU call (~8 minutes): 1. the full config/train_shakespeare_char.py under CUDA graphs with
# the residual dropout now in our fused add + LayerNorm (merged s7-dropout-ln), bytecode cache on (gpu_call_lib):
# tk on cold compile caches, torch, tk again on warm caches, launch to exit (dev/timeline.py); 2. Nsight Compute
# of the attention backward at (16,12,1024,64) causal, ours and cuDNN's (issue 8's lead: why 199 vs 231 TFLOP/s);
# 3. the MLP step's per-kernel profile (bench_mlp.py --profile, issue 11); 4. the classifier GPU tests (the
# loss-only test was refactored after its last GPU run).
source dev/gpu_call_lib.sh
pat="Overriding: kernels|using fused|^\[.{9}(step 0|step 250|first|best|iter 5000)|timeline\]"
char() {  # char NAME KERNELS
  timeout $(rem 110) python dev/timeline.py -- python train.py config/train_shakespeare_char.py --kernels=$2 \
    --compile=True --compile_mode=reduce-overhead --out_dir=$O/char_$2 --overwrite=True > $O/char_$1.log 2>&1
  echo "== char_$1 rc=$? at $((SECONDS - t0)) s"; grep -E "$pat" $O/char_$1.log | tail -8; rm -rf $O/char_$2
}
char tk_cold tk
char torch_cold torch
char tk_warm tk
ncu_one() {  # ncu_one NAME IMPL KERNEL_REGEX
  timeout $(rem 120) ncu -k "regex:$3" --launch-skip 3 --launch-count 1 --set full --import-source no \
    -o $O/$1 python dev/ncu_attention.py --impl $2 > $O/$1.log 2>&1
  echo "== ncu $1 rc=$? at $((SECONDS - t0)) s"
  ncu --import $O/$1.ncu-rep --page details > $O/$1_details.txt 2>&1
  ncu --import $O/$1.ncu-rep --page source --csv --print-source sass > $O/$1_sass.csv 2>&1
  grep -E "Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Executed Ipc A|Warp Cycles Per Issued|No Eligible" $O/$1_details.txt | head -12
}
ncu_one bwd_tk tk "attention_bwd_hopper"
ncu_one bwd_cudnn cudnn "flash_bprop"
step mlp_profile 60 python bench/bench_mlp.py --C 768 --skip-gemm --profile
tail -40 $O/mlp_profile.log
step classifier_tests 90 python -m pytest -m gpu -q -p no:cacheprovider --tb=short tests/classifier
tail -3 $O/classifier_tests.log; grep -E "^FAILED" $O/classifier_tests.log | head
[ $(rem 60) -ge 40 ] && char torch_warm torch
echo "done at $((SECONDS - t0)) s"
