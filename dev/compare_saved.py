"""Bitwise comparison of two tensor files written by the same script in two trees (e.g. dev/mlp_epilogue_ncu.py
--save): prints, per tensor, whether they are equal and else the largest difference.

    python dev/compare_saved.py a.pt b.pt
"""
import sys

import torch

a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
same = True
for k in sorted(set(a) | set(b)):
    if k not in a or k not in b:
        print(f"{k}: only in {'the first' if k in a else 'the second'}")
        same = False
        continue
    eq = torch.equal(a[k], b[k])
    same &= eq
    diff = "" if eq else f", max |diff| {(a[k].float() - b[k].float()).abs().max().item():.3g}"
    print(f"{k}: {'bitwise equal' if eq else 'DIFFERENT'}{diff}")
print("all bitwise equal" if same else "NOT all bitwise equal")
