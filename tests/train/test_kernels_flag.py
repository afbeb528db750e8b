"""train.py's kernels flag on a CPU: the plan is printed once, with its reason, and not repeated
by a warning from the first forward (eager and torch.compile)."""

import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REASON = "no CUDA GPU (tensors are on cpu)"


@pytest.mark.parametrize("compile", [False, True])
def test_auto_on_cpu_states_its_fallback_reason_once(char_data, tmp_path, compile):
    args = [os.path.join(REPO, "train.py"), os.path.join(REPO, "config", "train_shakespeare_char_cpu.py"),
            "--kernels=auto", "--max_iters=2", f"--data_dir={char_data}", f"--out_dir={tmp_path / 'out'}",
            "--n_layer=1", "--n_embd=32", "--n_head=2", "--block_size=16", "--batch_size=2",
            "--eval_iters=1", f"--compile={compile}"]
    env = dict(os.environ, PYTHONPATH=REPO, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    output = r.stdout + r.stderr
    assert output.count(REASON) == 1, output  # once, in the plan line (other families: "same as attention")
    assert "kernels=auto: attention=torch (TK unsupported: " + REASON in r.stdout
    assert "mlp=torch (TK unsupported: same as attention)" in r.stdout
    assert "falls back to PyTorch" not in output
