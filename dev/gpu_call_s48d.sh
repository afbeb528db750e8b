#!/usr/bin/env bash
# Session 48, last resort (~3.5 min, any card; seven refused starts left 323 s of device time): the LayerNorm
# forward's spill fix alone. .vln = HEAD + dev/patches/layernorm_fwd_raw_loads.patch (s48c's header); its
# LayerNorm family built (the only thing built), then pytest -m gpu tests/layernorm in it.
# Prep: rm -rf .vln && mkdir .vln && git archive HEAD | tar -x -C .vln && (cd .vln && patch -p1 <
#   ../dev/patches/layernorm_fwd_raw_loads.patch); run from .vln's parent with carry [".gpu_data", ".vln"]
cd .vln && ln -sfn ../.gpu_data .gpu_data
export MAX_JOBS=16 BUILD_ARGS="--family layernorm" LIMIT=${LIMIT:-200}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step t_ln 150 python -m pytest -m gpu -q -p no:cacheprovider tests/layernorm; tail -1 $O/t_ln.log; grep "^FAILED" $O/t_ln.log | head -5
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
