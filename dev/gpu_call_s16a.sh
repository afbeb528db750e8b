#!/usr/bin/env bash
# Prepared in session 15 (issue 11). Before the call (CPU machine): git apply dev/patches/mlp_eager_function.patch
# (the MLP op's eager path as an autograd.Function instead of torch.library's autograd wrapper: host time per
# fwd+bwd 283 -> 143 us on the CPU machine, dev/host_overhead.py; in eager mode the op was host-bound at C = 768,
# s15e). Runs the MLP / model GPU tests on it, bench_mlp, and the host-vs-GPU time check. Merge the patch if the
# tests pass and bench_mlp is no slower; then gpu_call_s16b.sh.
source dev/gpu_call_lib.sh
step tests 240 python -m pytest -m gpu -q -p no:cacheprovider --tb=short -rf tests/mlp tests/model
tail -1 $O/tests.log; grep -E "^FAILED|^ERROR" $O/tests.log | head -20
step mlp 150 python bench/bench_mlp.py --skip-gemm
grep -v -i warn $O/mlp.log | tail -5
step host 90 python dev/mlp_host_time.py --C 768 1024
grep -v -i warn $O/host.log | grep "ms/step"
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
