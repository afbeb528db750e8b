#!/usr/bin/env bash
# Session 15: is the MLP op host-bound in bench_mlp at C = 768 (s15d: its kernels sum to 0.842 ms, do_bench timed
# 1.006-1.329 ms over four runs)? Host vs GPU time per step, the CPU-side profile, and the bias-gradient A/B.
BUILD_ARGS="--family mlp"
source dev/gpu_call_lib.sh
step host 150 python dev/mlp_host_time.py --C 768 1024
grep -v -i warn $O/host.log | tail -24
step ab 120 python dev/mlp_bias_grad_ab.py --C 768 1024
grep -v -i warn $O/ab.log | tail -5
cd $O && tar czf logs.tgz --exclude logs.tgz *.log 2>/dev/null; ls | grep -v logs.tgz | xargs rm -rf
