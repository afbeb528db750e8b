#!/usr/bin/env bash
# Session 44's second call (~3 min, any card): s44a found our attention forward 124-141 us a call in GPT-2 medium's
# step (uniform over layers, moving step to step) against 103-106 us in short bursts, cuDNN 108-119 vs 105:
# dev/attention_sustained.py under sustained load with the SM clock and power logged every 100 ms.
export MAX_JOBS=10 BUILD_ARGS=" " LIMIT=${LIMIT:-300}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,temperature.gpu --format=csv,noheader
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 > $O/smi.log 2>&1 &
SMI=$!
step sus 150 python dev/attention_sustained.py; grep -E "H=|Error|error" $O/sus.log | head -40
kill $SMI
python - "$O/smi.log" <<'PY'
import sys, collections
rows = [l.strip().split(", ") for l in open(sys.argv[1]) if l.count(",") == 3]
by = collections.defaultdict(list)
for ts, clk, pw, tmp in rows:
    by[ts[11:19]].append((int(clk.split()[0]), float(pw.split()[0]), int(tmp)))
for sec, v in sorted(by.items()):
    print(sec, "clk", min(c for c, _, _ in v), "-", max(c for c, _, _ in v), "MHz, power max", max(p for _, p, _ in v), "W, temp", v[-1][2])
PY
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
