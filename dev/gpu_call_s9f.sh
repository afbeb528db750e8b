#!/usr/bin/env bash
# Session 9, call E (~7 minutes, the session's last device time): the causal forward's walk in head groups (items of
# ~2 x grid / n_mblocks heads, heavy-first and light-first groups alternating) instead of query-block-major over
# all heads, after Nsight Compute showed the D = 128 causal forward at 3.17 TB/s of DRAM traffic (L2 hit 32.6%: the
# 132 CTAs running together each streamed a different head's K / V). 1. builds: this tree, .variant (HEAD);
# 2. the attention GPU tests; 3. bench_attention.py --graphs, new / HEAD / new (noise); 4. ncu of the D = 128 causal
# forward; 5. bench_train.py GPT-2 124M under graphs, torch vs tk.
LIMIT=450
source dev/gpu_call_lib.sh
(cd .variant && python -m tk_kernels.build --family attention > $O/build_variant.log 2>&1); echo ".variant build rc=$? at $((SECONDS - t0)) s"
step tests 120 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/attention/test_attention_gpu.py \
  tests/attention/test_attention_dropout_gpu.py
tail -1 $O/tests.log; grep -E "^FAILED|^ERROR" $O/tests.log | head
step attn_new 40 python bench/bench_attention.py --graphs --impls tk,cudnn --json $O/attn_new.json
(cd .variant && timeout $(rem 40) python bench/bench_attention.py --graphs --impls tk,cudnn > $O/attn_main.log 2>&1); echo "== main rc=$?"
step attn_new2 40 python bench/bench_attention.py --graphs --impls tk,cudnn
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
print("| shape | causal | pass | HEAD (cuDNN) | new (cuDNN) | new again (cuDNN) |")
for key, c in new.items():
    m, n2 = main.get(key, [""] * 6), new2.get(key, [""] * 6)
    print(f"| {key[0]} | {key[1]} | {key[2]} | {m[4].strip()} ({m[5].strip()}) | {c[4].strip()} ({c[5].strip()}) | {n2[4].strip()} ({n2[5].strip()}) |")
PY
timeout $(rem 40) ncu -k "regex:attention_fwd_hopper" --launch-skip 3 --launch-count 1 --section SpeedOfLight \
  --section MemoryWorkloadAnalysis python dev/ncu_attention.py --impl tk --shape 8,16,2048,128 --causal 1 > $O/ncu_fwd128c.txt 2>&1
grep -E "Duration|DRAM Throughput|L2 Hit|Memory Throughput" $O/ncu_fwd128c.txt | head -6
step gpt2 150 python bench/bench_train.py --models gpt2 --compile graphs --kernels torch,tk --out $O/gpt2
grep -E "^gpt2 |tok/s" $O/gpt2.log | tail -4
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json *.txt 2>/dev/null && ls | grep -v logs.tgz | xargs rm -rf
