#!/usr/bin/env bash
# Session 44's fifth call (~3.5 min, any card): the SM clock and board power while GPT-2 medium's train step runs,
# torch and tk (bench_train --compile graphs, 40 timed steps each, one process each), nvidia-smi every 50 ms; the
# window read is the last 4 .. 1 s before each process ends (its timed steps; the teardown takes < 1 s). Then the
# attention forward cold / hot (dev/sustained_pairs.py) with the rank-4 tensor maps' L2 promotion at 128 B (.vp128)
# and none (.vpnone) instead of 256 B (the attention's maps only; s44c counted 25% more L2 traffic than cuDNN's).
# Prep: for v in vp128 vpnone; do rm -rf .$v; mkdir .$v; git archive HEAD | tar -x -C .$v;
#   (cd .$v && patch -p1 < ../dev/patches/attention_maps_l2_$v.patch); done; carry [".gpu_data", ".vp128", ".vpnone"]
export MAX_JOBS=10 BUILD_ARGS=" " VARIANTS=".vp128 .vpnone" VARIANT_JOBS=3 LIMIT=${LIMIT:-260}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 50 > $O/smi.log 2>&1 &
SMI=$!
for k in torch tk; do
  step med_$k 100 python bench/bench_train.py --models gpt2-medium --kernels $k --compile graphs --iters 40 --out $O/med_$k
  echo "$k end $(date +%H:%M:%S.%N)" | tee -a $O/ends.log; grep "tok/s" $O/med_$k.log | head -1
done
kill $SMI
python - "$O/smi.log" "$O/ends.log" <<'PY'
import sys, datetime as dt
def t(s): return dt.datetime.strptime(s.strip()[-15:], "%H:%M:%S.%f") if "." in s else None
rows = []
for l in open(sys.argv[1]):
    p = l.strip().split(", ")
    if len(p) == 4:
        rows.append((dt.datetime.strptime(p[0].split()[-1], "%H:%M:%S.%f"), int(p[1].split()[0]), float(p[2].split()[0]), int(p[3])))
for l in open(sys.argv[2]):
    k, _, s = l.split()
    end = dt.datetime.strptime(s[:15], "%H:%M:%S.%f")
    w = [r for r in rows if 1.0 <= (end - r[0]).total_seconds() <= 4.0]
    if w:
        print(f"{k:5s}: {len(w)} samples, SM clock mean {sum(r[1] for r in w) / len(w):.0f} MHz (min {min(r[1] for r in w)}, max {max(r[1] for r in w)}), "
              f"power mean {sum(r[2] for r in w) / len(w):.0f} W (max {max(r[2] for r in w):.0f}), temp {w[-1][3]} C")
PY
for r in 1; do for t in . .vp128 .vpnone; do
  (cd $t && step fw_${t#.}_$r 40 python dev/sustained_pairs.py --only "attention fwd (" --secs 2)
  echo "$t: $(grep 'us, peer' $O/fw_${t#.}_$r.log)"; done; done
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log med_*)
echo "all done at $((SECONDS - t0)) s"
