#!/usr/bin/env bash
# Session 45's second call (~8 min, right after s45a on the same warm machine, its builds cached): the dQ fold timed.
#   1. bench_attention --graphs --rounds 2 --impls tk,cudnn, main / .vfold / main / .vfold (the D = 64 backwards).
#   2. GPT-2 and GPT-2 medium train steps: torch and tk on main with --power (one process), then tk in .vfold, main,
#      .vfold (alternated processes: the step drifts ~0.07 ms a run).
# Prep: as s45a (.vfold); carry [".gpu_data", ".vfold"]
export MAX_JOBS=10 BUILD_ARGS=" " VARIANTS=".vfold" VARIANT_JOBS=6 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-580}
source dev/gpu_call_lib.sh
ba . main1; ba .vfold fold1; ba . main2; ba .vfold fold2
step med 150 python bench/bench_train.py --models gpt2,gpt2-medium --kernels torch,tk --compile graphs --power --out $O/med
grep -E "tok/s|vs torch|gpt2|SM MHz" $O/med.log | head -14
for r in f1 m1 f2; do
  t=$([ ${r:0:1} = f ] && echo .vfold || echo .)
  (cd $t && step tr_$r 90 python bench/bench_train.py --models gpt2,gpt2-medium --kernels tk --compile graphs --out $O/tr_$r)
  echo "$t $r: $(grep 'tok/s' $O/tr_$r.log | head -2 | tr '\n' ' ')"
done
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log med tr_*)
echo "all done at $((SECONDS - t0)) s"
