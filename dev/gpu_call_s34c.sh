#!/usr/bin/env bash
# Session 34 (issue 10): dev/classifier_streams.py, the classifier's softmax pass on a side stream beside its GEMMs
# (two logits buffers), against the family's serial chunk loop, C = 768 / 1024, 2048- and 1024-row chunks.
# Carry [".gpu_data"]. ~2 min.
export MAX_JOBS=12 LIMIT=${LIMIT:-240} BUILD_ARGS="--family classifier"
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
step streams 120 python dev/classifier_streams.py; grep -E "^C=|Error|error" $O/streams.log | head
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)
echo "all done at $((SECONDS - t0)) s"
