#!/usr/bin/env bash
# Session 41, the wide-tile half of gpu_call_s41c.sh alone (~6 min; the budget left after ten failed starts): the
# non-causal forwards of main / .vbn (192-key tiles) / .vbn176 (176-key tiles), their forward GPU tests, the A/B again
# in the reverse order. Prep and carry: s41c's, without .vep.
export MAX_JOBS=6 BUILD_ARGS="--family attention" VARIANTS=".vbn .vbn176" VARIANT_JOBS=5 LIMIT=${LIMIT:-420}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
FWD="16,12,1024,64;8,16,2048,64;4,16,4096,64;64,6,256,64;8,16,2048,128;4,16,4096,128;2,16,8192,128;1,16,16384,128"
bf() {  # bf TREE TAG: the non-causal forwards and backwards, ours and cuDNN's
  (cd $1 && step bf_$2 40 python bench/bench_attention.py --graphs --causal false --shapes "$FWD" --impls tk,cudnn)
  echo "-- $2 fwd: $(grep '^| (' $O/bf_$2.log | grep fwd | awk -F'|' '{printf "%s %s/%s; ", $2, $5, $6}')"
}
bf . main1; bf .vbn w192a; bf .vbn176 w176a
for t in .vbn .vbn176; do
  (cd $t && step t_fwd$t 60 python -m pytest -m gpu -q -p no:cacheprovider tests/attention/test_attention_gpu.py -k "full or layouts or hopper_forward or repeat or poison or raw_forward")
  tail -1 $O/t_fwd$t.log; grep "^FAILED" $O/t_fwd$t.log | head -3
done
bf .vbn176 w176b; bf .vbn w192b; bf . main2
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
