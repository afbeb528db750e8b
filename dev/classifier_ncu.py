"""One Hopper-path chunk (hopper_chunk_: logits GEMM, row kernel, dx GEMM) at R rows, C = 768, V = 50304, for Nsight
Compute:

    ncu -k regex:dlogits_kernel -c 1 --section SpeedOfLight --section WarpStateStats python dev/classifier_ncu.py [R]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tk_kernels.families.classifier import ops  # noqa: E402

R = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
C, V = 768, 50304
ext = ops._ext()
x = torch.randn(R, C, device="cuda").to(torch.bfloat16)
w = (torch.randn(V, C, device="cuda") * C ** -0.5).to(torch.bfloat16)
t = torch.randint(0, V, (R,), device="cuda")
ldl = (V + 7) // 8 * 8
logits = torch.empty(R, ldl, device="cuda", dtype=torch.bfloat16)
grad = torch.empty_like(logits)
stats = torch.empty(R, ext.logits_tiles(V), 2, device="cuda")
lse2, tcol = torch.empty(R, device="cuda"), torch.empty(R, device="cuda", dtype=torch.int32)
loss, dx32 = torch.empty(R, device="cuda"), torch.empty(R, C, device="cuda")
dx = torch.empty(R, C, device="cuda", dtype=torch.bfloat16)
for _ in range(2):
    ext.hopper_chunk_(x, w, t, logits, grad, stats, lse2, tcol, loss, dx32, dx, -1)
torch.cuda.synchronize()
print("dx sum", dx.float().sum().item())
