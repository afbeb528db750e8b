#!/usr/bin/env bash
# Session 9, call D (~8 minutes): the shipped form of call C's change (O from registers and 3 stages for D = 128
# without dropout only; D = 64 and dropout keep the staged TMA store). 1. builds: this tree and .variant (main);
# 2. the capture-failure repro in three more forms (bwd-only order; non-causal; SDPA flash) to narrow it down;
# 3. compute-sanitizer memcheck; 4. the attention GPU tests; 5. bench_attention.py --graphs, both builds side by
# side, tk / cuDNN; 6. Nsight Compute of the forward with the details kept this time (D = 64 causal GPT-2 shape,
# ours and cuDNN; D = 128 causal (8,16,2048,128), ours).
source dev/gpu_call_lib.sh
(cd .variant && python -m tk_kernels.build --family attention > $O/build_variant.log 2>&1); echo ".variant build rc=$? at $((SECONDS - t0)) s"
for r in "tk 1 bwd-only" "tk 0 fwd-first" "flash 1 fwd-first" "cudnn 1 fwd-first"; do
  set -- $r
  timeout $(rem 30) python dev/capture_first_bwd.py --impl $1 --causal $2 --order $3 > $O/capture_$1_$2_$3.log 2>&1
  echo "== capture $r: $(grep -E '^(forward|backward) capture' $O/capture_$1_$2_$3.log | tr '\n' ' ')"
  grep -E "^torch\.|Error:" $O/capture_$1_$2_$3.log | head -2
done
for sc in "2,3,300,128 0" "2,3,300,128 1" "1,5,200,64 1" "3,1,77,64 0"; do
  set -- $sc
  timeout $(rem 40) compute-sanitizer --tool memcheck --error-exitcode 9 python dev/ncu_attention.py --shape $1 --causal $2 \
    --iters 2 > $O/memcheck_$1_$2.log 2>&1
  echo "== memcheck $1 causal=$2 rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck_$1_$2.log) at $((SECONDS - t0)) s"
done
step tests 200 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/attention/test_attention_gpu.py \
  tests/attention/test_attention_qkv_gpu.py tests/attention/test_attention_dropout_gpu.py
tail -1 $O/tests.log; grep -E "^FAILED|^ERROR" $O/tests.log | head
step attn_new 60 python bench/bench_attention.py --graphs --impls tk,cudnn --json $O/attn_new.json
(cd .variant && timeout $(rem 60) python bench/bench_attention.py --graphs --impls tk,cudnn > $O/attn_main.log 2>&1); echo "== main rc=$?"
step attn_new2 60 python bench/bench_attention.py --graphs --impls tk,cudnn
python - $O <<'PY'
import sys, os
o = sys.argv[1]
def table(f):
    rows = {}
    for line in open(os.path.join(o, f)):
        c = line.split("|")
        if line.startswith("| (") and len(c) > 5: rows[(c[1].strip(), c[2].strip(), c[3].strip())] = c
    return rows
new, main, new2 = table("attn_new.log"), table("attn_main.log"), table("attn_new2.log")
print("| shape | causal | pass | main (cuDNN) | new (cuDNN) | new again (cuDNN) |")
for key, c in new.items():
    m, n2 = main.get(key, [""] * 6), new2.get(key, [""] * 6)
    print(f"| {key[0]} | {key[1]} | {key[2]} | {m[4].strip()} ({m[5].strip()}) | {c[4].strip()} ({c[5].strip()}) | {n2[4].strip()} ({n2[5].strip()}) |")
PY
ncu_one() {  # ncu_one NAME IMPL KERNEL_REGEX SHAPE CAUSAL
  timeout $(rem 60) ncu -k "regex:$3" --launch-skip 3 --launch-count 1 --set full --import-source no \
    -o $O/$1 python dev/ncu_attention.py --impl $2 --shape $4 --causal $5 > $O/$1.log 2>&1
  echo "== ncu $1 rc=$? at $((SECONDS - t0)) s"
  ncu --import $O/$1.ncu-rep --page details > $O/$1_details.txt 2>&1
  ncu --import $O/$1.ncu-rep --page source --csv --print-source sass > $O/$1_sass.csv 2>&1
  rm -f $O/$1.ncu-rep
  grep -E "Duration|Issue Slots Busy|Executed Ipc A|No Eligible|Executed Instructions  " $O/$1_details.txt | head -6
}
ncu_one fwd64_tk tk "attention_fwd_hopper" 16,12,1024,64 1
ncu_one fwd64_cudnn cudnn "fprop" 16,12,1024,64 1
ncu_one fwd128c_tk tk "attention_fwd_hopper" 8,16,2048,128 1
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json *.txt *.csv 2>/dev/null && ls | grep -v logs.tgz | xargs rm -f
