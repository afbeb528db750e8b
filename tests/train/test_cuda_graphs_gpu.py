"""train.py with --compile_mode=reduce-overhead (CUDA graphs) on a GPU: the same run as the default
compile mode, step for step, with kernels=tk, gradient accumulation and evaluations in between.

Both runs start from the same seed and draw the same batches; dropout is 0 so that nothing random
differs. The losses agree to bf16 noise (the graphs replay the same kernels; only fusion decisions
may differ), and the graphs run must not fall back to eager or re-record every step (checked by
its speed relative to the default mode being printed, not asserted: no timing asserts)."""

import json
import os
import subprocess
import sys

import pytest
import torch

pytestmark = pytest.mark.gpu

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def train(char_data, out, compile_mode, kernels):
    log = out / "log.jsonl"
    args = [os.path.join(REPO, "train.py"), os.path.join(REPO, "config", "train_shakespeare_char.py"),
            f"--data_dir={char_data}", f"--out_dir={out}", f"--log_file={log}", "--max_iters=40",
            "--eval_interval=20", "--eval_iters=5", "--log_interval=1", "--warmup_iters=10", "--n_layer=2", "--n_embd=128",
            "--n_head=2", "--batch_size=16", "--gradient_accumulation_steps=2", "--dropout=0.0",
            f"--kernels={kernels}", "--compile=True", f"--compile_mode={compile_mode}", "--overwrite=True"]
    r = subprocess.run([sys.executable, *args], cwd=out.parent, capture_output=True, text=True,
                       timeout=900, env=dict(os.environ, PYTHONPATH=REPO))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    records = [json.loads(line) for line in log.read_text().splitlines()]
    steps = {x["iter"]: x["loss"] for x in records if "loss" in x}
    evals = {x["iter"]: x["val_loss"] for x in records if "val_loss" in x}
    times = [x["time_ms"] for x in records if "time_ms" in x][5:]
    return steps, evals, sorted(times)[len(times) // 2]


@pytest.mark.parametrize("kernels", ["torch", "tk"])
def test_reduce_overhead_trains_like_default(char_data, tmp_path, kernels):
    if kernels == "tk" and torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("the tk kernels need compute capability >= 8.0")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    steps_d, evals_d, ms_d = train(char_data, tmp_path / "a", "default", kernels)
    steps_g, evals_g, ms_g = train(char_data, tmp_path / "b", "reduce-overhead", kernels)
    print(f"[cuda graphs, kernels={kernels}] median step {ms_d:.2f} ms default, {ms_g:.2f} ms graphs")
    assert set(steps_d) == set(steps_g) and len(steps_d) == 41  # iterations 0 .. max_iters
    assert set(evals_d) == set(evals_g) == {0, 20, 40}
    for it in steps_d:
        assert steps_g[it] == pytest.approx(steps_d[it], rel=2e-2), (it, steps_d[it], steps_g[it])
    for it in evals_d:
        assert evals_g[it] == pytest.approx(evals_d[it], rel=1e-2), (it, evals_d[it], evals_g[it])
    assert steps_g[39] < steps_g[0] - 0.3  # it learns
