"""The classifier's kernels on small ragged inputs, for compute-sanitizer (memcheck, racecheck, synccheck):

    compute-sanitizer --tool racecheck --error-exitcode 9 python dev/classifier_sanitize.py

Runs softmax_xent_grad_ at V = 50257 (odd: unaligned rows), 65536 and 65 with ignored rows and an out-of-range target, then mul_scalar with a
tail, in bf16 and fp16, and prints the results' checksums.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tk_kernels.families.classifier import ops  # noqa: E402

ext = ops._ext()
for dtype in (torch.bfloat16, torch.float16):
    for V, rows in ((50257, 300), (65536, 5), (65, 17)):
        lg = torch.randn(rows, V, device="cuda").to(dtype)
        t = torch.randint(0, V, (rows,), device="cuda")
        t[1], t[-1] = -1, V
        loss = torch.empty(rows, device="cuda")
        ext.softmax_xent_grad_(lg, t, loss, -1)
        print(f"{dtype} V={V} rows={rows}: grad sum "
              f"{lg.float().sum().item():.4f}, loss nansum {loss.nansum().item():.4f}")
    x = torch.randn(1003, device="cuda").to(dtype)
    s = torch.rand(2, device="cuda")
    print(f"{dtype} mul_scalar equal: {torch.equal(ext.mul_scalar(x, s[1:2]), (x.float() * s[1]).to(dtype))}")
torch.cuda.synchronize()
