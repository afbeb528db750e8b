#!/usr/bin/env bash
# Session 28's first call: the classifier's softmax kernel (issues 10 / 12), four trees side by side, then GPT-2's
# step on HEAD with its kernel list:
#   .       HEAD: two block reductions (M, then S), two exponentials a logit, one 800-thread CTA a row (an SM each);
#   .vmerged one merged (max, sum) reduction (online softmax), still two exponentials;
#   .vpair  the same with each row split between the two CTAs of a cluster (416 threads each, two CTAs an SM);
#   .vstage .vpair with one exponential a logit (exp(x - m) kept in fp16 in place of the logits: exact to
#           2^-11 before the final rounding, so it cannot pass the 1-ulp elementwise test; its accuracy is printed).
# Steps: tests/classifier GPU tests in .vmerged and .vpair (.vstage: all but the elementwise kernel test), then
# dev/softmax_xent_ab.py in each tree, alternated; then run_all train (gpt2, torch / tk, CUDA graphs, --top 40) here.
# Carry [".gpu_data", ".vmerged", ".vpair", ".vstage"]. Prep: each = git archive HEAD + dev/patches/softmax_xent_
# {merged,pair,pair_staged}.patch.
#   SHORT=1: the classifier trees alone (only that family built, no train section; ~5 min).
export MAX_JOBS=10 VARIANTS=".vmerged" VARIANT_JOBS=2 VARIANT_BUILD_ARGS="--family classifier"
#   TINY=1: HEAD and .vpair alone (.vpair's GPU tests, two rounds of the A/B; ~3 min; implies SHORT).
[ -n "$TINY" ] && export SHORT=1 VARIANTS=""
[ -n "$SHORT" ] && export MAX_JOBS=4 BUILD_ARGS="--family classifier"
export LIMIT=${LIMIT:-540}
mkdir -p ${OUT:-out}; export TORCH_EXTENSIONS_DIR=$PWD/build/torch_extensions
for v in .vpair $([ -z "$TINY" ] && echo .vstage); do (cd $v && MAX_JOBS=2 python -m tk_kernels.build --family classifier > ${OUT:-out}/build$v.log 2>&1) & done
source dev/gpu_call_lib.sh
wait; tail -qn1 $O/build.v*.log
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
T=tests/classifier/test_classifier_gpu.py
[ -z "$TINY" ] && { (cd .vmerged && step cls_tests 60 python -m pytest -m gpu -q -x -p no:cacheprovider $T); tail -2 $O/cls_tests.log; }
(cd .vpair && step cls_tests_pair 60 python -m pytest -m gpu -q -x -p no:cacheprovider $T); tail -2 $O/cls_tests_pair.log
[ -z "$TINY" ] && { (cd .vstage && step cls_tests_stage 50 python -m pytest -m gpu -q -p no:cacheprovider $T -k "not softmax_kernel_vs_float64"); tail -2 $O/cls_tests_stage.log; }
sx() { (cd $1 && step sx_$2 30 python dev/softmax_xent_ab.py); echo "-- $2"; grep -E "^kernel|^op" $O/sx_$2.log; }
if [ -n "$TINY" ]; then sx . base1; sx .vpair pair1; sx . base2; sx .vpair pair2; else
sx . base1; sx .vmerged merged1; sx .vpair pair1; sx .vstage stage1
sx . base2; sx .vmerged merged2; sx .vpair pair2; sx .vstage stage2
fi
[ -z "$SHORT" ] && step runall_train 130 python bench/run_all.py --out $PWD/bench/out/run_all --benches train --timeout 125 \
   --train-args "--models gpt2 --compile graphs --top 40"
grep -E "^== |rewrote" $O/runall*.log
cp bench/RESULTS.md $O/RESULTS.md
tar -czf $O/run_all.tgz -C bench/out run_all
(cd $O && tar -czf logs.tgz *.log && rm -f *.log)  # the device returns at most 8 files
echo "all done at $((SECONDS - t0)) s"
