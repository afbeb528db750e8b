"""bench/bench_attention.py's --rounds: the order rotates each round and each implementation gets its median."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from bench import bench_attention  # noqa: E402


def test_rounds_rotate_the_order_and_take_medians(monkeypatch):
    orders, times = [], {"tk": [3.0, 1.0, 2.0], "cudnn": [5.0, 4.0, 6.0]}

    def fake_run_shape(shape, causal, dtype, impls, seed, graphs=False):
        r = len(orders) % 3
        orders.append(list(impls))
        out = {"fwd": {}, "bwd": {}, "check": {"round": r}}
        for name in impls:
            out["fwd"][name] = {"ms": times[name][r], "p20_ms": times[name][r] - 0.1, "p80_ms": times[name][r] + 0.1}
            out["bwd"][name] = {"error": "RuntimeError: no"} if name == "cudnn" else dict(out["fwd"][name])
        return out

    monkeypatch.setattr(bench_attention, "run_shape", fake_run_shape)
    shape = (1, 2, 128, 64)
    r = bench_attention.run_rounds(shape, True, None, ["tk", "cudnn"], 0, rounds=3)
    assert orders == [["tk", "cudnn"], ["cudnn", "tk"], ["tk", "cudnn"]]
    assert r["fwd"]["tk"]["ms"] == 2.0 and r["fwd"]["tk"]["rounds_ms"] == [3.0, 1.0, 2.0]
    assert r["fwd"]["cudnn"]["ms"] == 5.0 and r["fwd"]["cudnn"]["p20_ms"] == 3.9 and r["fwd"]["cudnn"]["p80_ms"] == 6.1
    assert abs(r["fwd"]["tk"]["tflops"] - bench_attention.flops(*shape, True, "fwd") / 2e-3 / 1e12) < 1e-9
    assert r["bwd"]["cudnn"] == {"error": "RuntimeError: no"}  # never timed: round 0's error
    assert r["check"] == {"round": 0}
    two = bench_attention.run_rounds(shape, True, None, ["tk"], 0, rounds=2)  # even count: the middle two's mean
    assert orders[3:] == [["tk"], ["tk"]]
    assert two["fwd"]["tk"]["ms"] == 2.0  # times 3.0 and 1.0 (the fake table's rows 0 and 1)
