#!/usr/bin/env bash
# Session 41, the call that replaced s41a after the first hour brought no machine (~9 min, any card): the two
# mergeable candidates, without s41a's diagnostic phase stamps.
#   .vep    = dev/patches/attention_bwd_dkdv_tma_store.patch (s41a's: dK / dV through shared memory and TMA stores)
#   .vbn    = dev/patches/attention_fwd_wide_tiles.patch: the forward's non-causal p = 0 instances on 192-key K / V
#             tiles (m64n192 S, 12 k-steps of P V). D = 128: 2 stages of 96 KB, Q from shared memory (96 + 48 + 64
#             accumulator / P / O registers; Q in registers too spilled 224 B); D = 64: 3 stages of 48 KB, Q from
#             registers. Causal and dropout instances unchanged. (FlashAttention-3 picks 128 x 176 at D = 128
#             non-causal, with 128 x 192 "quite good too", and 192 x 192 at D = 64.) Spill-free, no C75xx.
#   .vbn176 = the same with 176-key tiles (wgmma_ops.cuh regenerated with n = 176).
# Steps: the non-causal forwards of main / .vbn / .vbn176 (bench_attention --causal false, tk and cuDNN); .vep's
# outputs against main, its racecheck + memcheck; bench_attention main / .vep; .vbn and .vbn176's forward GPU tests;
# the non-causal forwards again in the reverse order.
# Prep: for t in .vep .vbn .vbn176; do rm -rf $t && mkdir $t && git archive HEAD | tar -x -C $t; done;
#   (cd .vep && patch -p1 < ../dev/patches/attention_bwd_dkdv_tma_store.patch);
#   (cd .vbn && patch -p1 < ../dev/patches/attention_fwd_wide_tiles.patch);
#   (cd .vbn176 && patch -p1 < ../dev/patches/attention_fwd_wide_tiles.patch && sed -i 's/#define BN_WIDE 192/#define BN_WIDE 176/; s/#define BN_WIDE64 192/#define BN_WIDE64 176/' tk_kernels/families/attention/csrc/hopper_forward.cu && sed -i 's/^NS = (32, 64, 128, 192, 256)/NS = (32, 64, 128, 176, 192, 256)/' dev/hopper/gen_wgmma.py && python dev/hopper/gen_wgmma.py)
#   carry [".gpu_data", ".vep", ".vbn", ".vbn176"]
export MAX_JOBS=6 BUILD_ARGS="--family attention" VARIANTS=".vep .vbn .vbn176" VARIANT_JOBS=4 LIMIT=${LIMIT:-560}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
bf . main1; bf .vbn w192a; bf .vbn176 w176a
bwd_checks .vep
ba . main1; ba .vep ep1
fwd_tests .vbn; fwd_tests .vbn176
bf .vbn176 w176b; bf .vbn w192b; bf . main2
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
