#!/usr/bin/env bash
# Session 29's first call: the two sets of unrun patches from sessions 27-28, then GPT-2's step with the CTA-pair
# softmax, in order of value, each step under its own time limit (LIMIT, default 570 s):
#   1. issue 10 / 12: the classifier's softmax kernel in four trees (HEAD, .vmerged, .vpair, .vstage; see
#      gpu_call_s28a.sh), their classifier GPU tests, then dev/softmax_xent_ab.py alternated;
#   2. issue 9: the backward-only causal Philox skip (.vdsb), its Hopper dropout tests, the overhead alternated;
#   3. issue 12: GPT-2's step (bench_train --compile graphs), torch and tk here, tk in .vpair, alternated.
# Carry [".gpu_data", ".vmerged", ".vpair", ".vstage", ".vdsb"]. Prep: each = git archive HEAD + its patch
# (dev/patches/softmax_xent_{merged,pair,pair_staged}.patch, attention_dropout_causal_skip_bwd.patch).
export MAX_JOBS=7 LIMIT=${LIMIT:-570}
mkdir -p ${OUT:-out}; export TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions
vb() { (cd $1 && MAX_JOBS=$2 python -m tk_kernels.build $3 > ${OUT:-out}/build$1.log 2>&1; echo "$1 build rc=$?" >> ${OUT:-out}/build$1.log) & }
vb .vpair 4 ""; vb .vmerged 1 "--family classifier"; vb .vstage 1 "--family classifier"; vb .vdsb 3 "--family attention"
source dev/gpu_call_lib.sh
wait; tail -qn1 $O/build.v*.log; echo "all builds at $((SECONDS - t0)) s"
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
T=tests/classifier/test_classifier_gpu.py
for v in .vpair .vmerged; do (cd $v && step cls_tests$v 50 python -m pytest -m gpu -q -x -p no:cacheprovider $T); tail -1 $O/cls_tests$v.log; done
(cd .vstage && step cls_tests.vstage 50 python -m pytest -m gpu -q -p no:cacheprovider $T -k "not softmax_kernel_vs_float64"); tail -1 $O/cls_tests.vstage.log
sx() { (cd $1 && step sx_$2 30 python dev/softmax_xent_ab.py); echo "-- $2"; grep -E "^kernel|^op" $O/sx_$2.log; }
sx . base1; sx .vpair pair1; sx .vmerged merged1; sx .vstage stage1; sx . base2; sx .vpair pair2
(cd .vdsb && step drop_tests 60 python -m pytest -m gpu -q -x -p no:cacheprovider tests/attention/test_attention_dropout_gpu.py -k "hopper or same_mask")
tail -1 $O/drop_tests.log
ab() { step $1 30 python bench/bench_attention_dropout.py --graphs --impls tk; grep -E "^[0-9]|overhead" $O/$1.log | head -4; }
ab drop_a; (cd .vdsb && ab drop_b); ab drop_c; (cd .vdsb && ab drop_d)
train_abab .vpair
(cd $O && tar -czf train.tgz train_? && rm -rf train_?)
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)  # the device returns at most 8 files
echo "all done at $((SECONDS - t0)) s"
