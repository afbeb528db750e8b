#!/usr/bin/env bash
# Session 45 (~6 min, any card): the rank-4 tensor maps' L2 promotion off (.vpnone, dev/patches/
# attention_maps_l2_vpnone.patch) in the train step. s45c had its forward hot at 0.972 / 0.952 of cuDNN's against
# main's 0.954 / 0.944 (two rounds; cold level): inside the rounds' spread, so judged here by the step.
#   1. GPT-2 medium and GPT-2 tk steps (bench_train --compile graphs, 40 timed steps): main, .vpnone, main, .vpnone.
#   2. .vpnone: the attention GPU tests.
# Prep: rm -rf .vpnone; mkdir .vpnone; git archive HEAD | tar -x -C .vpnone;
#   (cd .vpnone && patch -p1 < ../dev/patches/attention_maps_l2_vpnone.patch); carry [".gpu_data", ".vpnone"]
export MAX_JOBS=10 BUILD_ARGS=" " VARIANTS=".vpnone" VARIANT_JOBS=6 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-360}
source dev/gpu_call_lib.sh
for r in m1 p1 m2 p2; do
  t=$([ ${r:0:1} = p ] && echo .vpnone || echo .)
  (cd $t && step tr_$r 70 python bench/bench_train.py --models gpt2-medium,gpt2 --kernels tk --compile graphs --iters 40 --out $O/tr_$r)
  echo "$t $r: $(grep 'tok/s' $O/tr_$r.log | head -2 | tr '\n' ' ')"
done
(cd .vpnone && step t_att 160 python -m pytest -m gpu -q -p no:cacheprovider tests/attention -x); tail -1 $O/t_att.log
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log tr_*)
echo "all done at $((SECONDS - t0)) s"
