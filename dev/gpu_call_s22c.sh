#!/usr/bin/env bash
# Session 22, on s22b's still-warm machine: .v192sd = .v192d + .v192st's stmatrix staging (the two changes together),
# checked (bitwise against .v192d, tests/mlp, racecheck) and timed beside main and .v192d; bench_mlp side by side.
export LIMIT=${LIMIT:-200} MAX_JOBS=16 BUILD_ARGS="--family mlp" VARIANTS=".v192sd" VARIANT_JOBS=8 VARIANT_BUILD_ARGS="--family mlp"
source dev/gpu_call_lib.sh
(cd .v192d && step save_v192d 30 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_v192d.pt)
(cd .v192sd && step save_v192sd 30 python dev/mlp_epilogue_ncu.py --small --sums --save $O/saved_v192sd.pt)
echo "-- v192sd vs v192d (all bitwise):"; python dev/compare_saved.py $O/saved_v192d.pt $O/saved_v192sd.pt
(cd .v192sd && step tests 80 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp) &
SAN_SECS=80 san .v192sd v192sd racecheck memcheck
wait; echo "tests: $(tail -1 $O/tests.log)"
epi . main; epi .v192d v192d; epi .v192sd v192sd; epi . main2; epi .v192d v192d_2; epi .v192sd v192sd_2
step mlp_main 40 python bench/bench_mlp.py --skip-gemm --json $O/mlp_main.json; tail -5 $O/mlp_main.log
(cd .v192sd && step mlp_v192sd 40 python bench/bench_mlp.py --skip-gemm --json $O/mlp_v192sd.json); tail -5 $O/mlp_v192sd.log
echo "all done at $((SECONDS - t0)) s"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log *.json 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
