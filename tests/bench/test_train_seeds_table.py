"""bench/train_seeds_table.py: the table of gpu_session.sh's train_seeds step, from fake logs."""

import subprocess
import sys


def test_table_from_logs(tmp_path, repo_root):
    for k in ("tk", "torch"):
        for s, best in ((1337, 1.4612), (1, 1.4655), (2, 1.4701)):
            (tmp_path / f"{k}_{s}.log").write_text(
                f"step 0: train loss 4.2000, val loss 4.1900 (x)\nstep 250: train loss 2.0000, val loss {best + 0.5:.4f}\n"
                f"step 500: train loss 1.5000, val loss {best:.4f}\nbest val loss {best:.4f}\n")
            (tmp_path / f"{k}_{s}.rc").write_text("0 321\n")
    out = subprocess.run([sys.executable, "bench/train_seeds_table.py", str(tmp_path)], cwd=repo_root,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert "tk        1337    1.4612     321   0" in lines
    assert any(line.split() == ["500"] + ["1.4612", "1.4655", "1.4701"] * 2 for line in lines), out.stdout
    assert "tk: best val mean 1.4656 over 3 seeds (min 1.4612, max 1.4701)" in lines
    (tmp_path / "torch_2.log").write_text("crashed\n")
    out = subprocess.run([sys.executable, "bench/train_seeds_table.py", str(tmp_path)], cwd=repo_root,
                         capture_output=True, text=True)
    assert out.returncode == 1 and "torch        2       n/a" in out.stdout
