#!/usr/bin/env bash
# Session 9, call C (~9 minutes): the Hopper forward with O stored from registers (no staging buffer), which frees
# the shared memory for a third K / V stage at D = 128 (was 2). 1. builds: this tree, .variant (main before the
# change), .variant2 (this tree with 4 stages at D = 64); 2. compute-sanitizer memcheck of the forward on ragged
# shapes; 3. the attention GPU tests (forward matrix on both paths, qkv views, dropout); 4. bench_attention.py
# --graphs, tk and cuDNN, the three builds; 5. the repro of the first-shape capture failure of s9b.
source dev/gpu_call_lib.sh
for vdir in .variant .variant2; do
  (cd $vdir && python -m tk_kernels.build --family attention > $O/build_$vdir.log 2>&1); echo "$vdir build rc=$? at $((SECONDS - t0)) s"
done
step capture_repro 40 python dev/capture_first_bwd.py --impl tk
grep -E "ok|FAILED|Error" $O/capture_repro.log | head -12
for sc in "2,3,300,128 0" "2,3,300,128 1" "1,5,200,64 1" "1,5,77,64 0"; do
  set -- $sc
  timeout $(rem 40) compute-sanitizer --tool memcheck --error-exitcode 9 python dev/ncu_attention.py --shape $1 --causal $2 \
    --iters 2 > $O/memcheck_$1_$2.log 2>&1
  echo "== memcheck $1 causal=$2 rc=$? $(grep -E 'ERROR SUMMARY' $O/memcheck_$1_$2.log) at $((SECONDS - t0)) s"
done
step tests 200 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/attention/test_attention_gpu.py \
  tests/attention/test_attention_qkv_gpu.py tests/attention/test_attention_dropout_gpu.py
tail -1 $O/tests.log; grep -E "^FAILED|^ERROR" $O/tests.log | head
step attn_new 80 python bench/bench_attention.py --graphs --impls tk,cudnn
for vdir in .variant .variant2; do
  (cd $vdir && timeout $(rem 60) python bench/bench_attention.py --graphs --impls tk > $O/attn_$vdir.log 2>&1); echo "== $vdir rc=$?"
done
python - $O <<'PY'
import re, sys, os
o = sys.argv[1]
def table(f):
    rows = {}
    for line in open(os.path.join(o, f)):
        c = line.split("|")
        if line.startswith("| (") and len(c) > 5: rows[(c[1].strip(), c[2].strip(), c[3].strip())] = c
    return rows
new, base, v2 = table("attn_new.log"), table("attn_.variant.log"), table("attn_.variant2.log")
print("| shape | causal | pass | main | new | new, D=64 4 stages | cuDNN |")
for key, cells in new.items():
    if key[2] != "fwd": continue
    b = base.get(key, [""] * 6)[4].strip(); w = v2.get(key, [""] * 6)[4].strip()
    print(f"| {key[0]} | {key[1]} | fwd | {b} | {cells[4].strip()} | {w} | {cells[5].strip()} |")
PY
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null && ls | grep -v logs.tgz | xargs rm -f
