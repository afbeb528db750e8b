#!/usr/bin/env bash
# Session 47, follow-up of s47d on the warm machine (only if .vcl4 won there): the merge checks of
# dev/patches/mlp_cluster4.patch. Every family built in both trees; compute-sanitizer memcheck / racecheck on the
# epilogues in .vcl4 (background); tests/mlp's GPT-step test in .vcl4; GPT-2 medium's tk step (bench_train --compile
# graphs), .vcl4 and main alternated. carry [".gpu_data", ".vcl4"]
export MAX_JOBS=8 BUILD_ARGS="" VARIANTS=".vcl4" VARIANT_JOBS=8 VARIANT_BUILD_ARGS=" " LIMIT=${LIMIT:-400}
source dev/gpu_call_lib.sh
SAN_SECS=200 san .vcl4 cl4 memcheck racecheck
(cd .vcl4 && step t_step 120 python -m pytest -m gpu -q -p no:cacheprovider tests/mlp/test_mlp_gpu.py -k "gpt_step"); tail -1 $O/t_step.log
for r in 1 2; do
  (cd .vcl4 && step med_cl4$r 80 python bench/bench_train.py --models gpt2-medium --kernels tk --compile graphs); echo "cl4 $r $(grep tok/s $O/med_cl4$r.log | head -1)"
  step med_main$r 80 python bench/bench_train.py --models gpt2-medium --kernels tk --compile graphs; echo "main $r $(grep tok/s $O/med_main$r.log | head -1)"
done
wait
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
