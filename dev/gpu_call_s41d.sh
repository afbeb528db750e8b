#!/usr/bin/env bash
# Session 41, the wide-tile half of gpu_call_s41c.sh alone (~6 min; the budget left after ten failed starts): the
# non-causal forwards of main / .vbn (192-key tiles) / .vbn176 (176-key tiles), their forward GPU tests, the A/B again
# in the reverse order. Prep and carry: s41c's, without .vep.
export MAX_JOBS=6 BUILD_ARGS="--family attention" VARIANTS=".vbn .vbn176" VARIANT_JOBS=5 LIMIT=${LIMIT:-420}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
bf . main1; bf .vbn w192a; bf .vbn176 w176a
fwd_tests .vbn; fwd_tests .vbn176
bf .vbn176 w176b; bf .vbn w192b; bf . main2
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
