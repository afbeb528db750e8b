#!/usr/bin/env bash
# Session 40, the one call that decides the one-consumer dQ (~9 min; device starts failed for 45 minutes, so this is
# gpu_call_s40_first.sh cut to one mergeable candidate): .vmb64 = HEAD + the one-consumer dQ at both D (the D = 64 form
# of session 39 with its dead code removed; hopper_backward.cu SASS identical to the experiment's), .vmb = the same at
# D = 128 only (the mbarrier hand-over). Outputs against main, racecheck and memcheck of .vmb64 (its D = 128 code is
# .vmb's), bench_attention main / .vmb64 / .vmb / main / .vmb64, .vmb64's attention GPU tests.
# Prep: .vmb, .vmb64 as in gpu_call_s40_first.sh, then clean .vmb64 (see the session-40 commit); carry
# [".gpu_data", ".vmb", ".vmb64"]
export MAX_JOBS=6 BUILD_ARGS="--family attention" VARIANTS=".vmb .vmb64" VARIANT_JOBS=5 LIMIT=${LIMIT:-420}
source dev/gpu_call_lib.sh
nvidia-smi --query-gpu=name,clocks.sm --format=csv,noheader
python -c "import torch; print(torch.__version__, torch.version.cuda, torch.backends.cudnn.version())"
step ref 30 python dev/attention_bwd_pieces.py --save /tmp/ref_all.pt; tail -1 $O/ref.log
for t in .vmb64 .vmb; do (cd $t && step cmp$t 30 python dev/attention_bwd_pieces.py --compare /tmp/ref_all.pt); tail -1 $O/cmp$t.log; done
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for tool in racecheck; do
  (cd .vmb64 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step ${tool} 50 $cs --tool $tool --error-exitcode 9 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small)
  grep -E "RACECHECK SUMMARY|ERROR SUMMARY" $O/${tool}.log
done
ba . main1; ba .vmb64 mb64_1
(cd .vmb64 && step t_att 170 python -m pytest -m gpu -q -p no:cacheprovider tests/attention); tail -1 $O/t_att.log
grep "^FAILED" $O/t_att.log | head -5
(cd .vmb64 && PYTORCH_NO_CUDA_MEMORY_CACHING=1 step memcheck 50 $cs --tool memcheck --error-exitcode 9 python dev/attention_bwd_pieces.py --save /tmp/san.pt --small)
grep -E "ERROR SUMMARY" $O/memcheck.log
ba . main2; ba .vmb64 mb64_2; ba .vmb mb1
(cd $O && tar -czf logs.tgz *.log && rm -rf *.log)
echo "all done at $((SECONDS - t0)) s"
