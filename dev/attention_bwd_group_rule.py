"""The causal Hopper backward's launch-group rule, old (heads filling half the L2: L2 / 2 over 8 T D bytes a head, sessions 12-23)
against new (a quarter, merged in 97c01d4), A/B/A/B at every causal shape of bench_attention.py and GPT-2 medium's, with
dev/patches/attention_bwd_group_env.patch's TK_HB_GROUP override for the old rule. CUDA-graph replays of the
backward (tk::attention_bwd on contiguous q, k, v; prep, fill, convert included), us.

    python dev/attention_bwd_group_rule.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tk_kernels  # noqa: E402,F401
from attention_bwd_group_sweep import backward_us  # noqa: E402

SHAPES = [(16, 12, 1024, 64), (16, 16, 1024, 64), (8, 16, 2048, 64), (4, 16, 4096, 64), (64, 6, 256, 64),
          (8, 16, 2048, 128), (4, 16, 4096, 128), (2, 16, 8192, 128), (1, 16, 16384, 128)]


def main():
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    print(torch.cuda.get_device_name(), torch.__version__, "L2", l2)
    for B, H, T, D in SHAPES:
        per_head = 8 * T * D
        old = max(1, min(B * H, (l2 // 2) // per_head))
        new = max(1, min(B * H, (l2 // 4) // per_head))
        q, k, v = (torch.randn(B, H, T, D, device="cuda", dtype=torch.bfloat16) for _ in range(3))
        o, lse, rng = torch.ops.tk.attention_fwd(q, k, v, True, D ** -0.5, 0.0)
        dout = torch.randn_like(o)
        res = {"old": [], "new": []}
        for _ in range(2):
            for name, g in (("old", old), ("new", None)):
                res[name].append(backward_us(
                    lambda: torch.ops.tk.attention_bwd(q, k, v, o, lse, dout, True, D ** -0.5, False, 0.0, rng), g))
        mo, mn = sum(res["old"]) / 2, sum(res["new"]) / 2
        print(f"({B},{H},{T},{D}) groups old {old} / new {new}: old {res['old'][0]:.1f} {res['old'][1]:.1f}  "
              f"new {res['new'][0]:.1f} {res['new'][1]:.1f}  -> {mo / mn:.3f}x")


if __name__ == "__main__":
    main()
