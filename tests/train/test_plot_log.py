"""plot_log.py: train.py log files (JSON lines) to a PNG of loss and tokens/s."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLOT = os.path.join(REPO, "plot_log.py")


def write_log(path, n, loss0, tok_per_s=True):
    with open(path, "w") as f:
        for i in range(n + 1):
            if i % 5 == 0:
                f.write(json.dumps({"iter": i, "train_loss": loss0 - 0.1 * i, "val_loss": loss0 - 0.09 * i}) + "\n")
            record = {"iter": i, "loss": loss0 - 0.1 * i, "lr": 1e-3, "time_ms": 10.0}
            if tok_per_s:
                record["tok_per_s"] = 25600.0 + i
            f.write(json.dumps(record) + "\n")


def test_plot_two_runs(tmp_path):
    pytest.importorskip("matplotlib")
    sys.path.insert(0, REPO)
    import plot_log
    write_log(tmp_path / "a.jsonl", 10, 4.0)
    write_log(tmp_path / "b.jsonl", 20, 4.2, tok_per_s=False)  # an older log, without tok_per_s
    fig = plot_log.plot([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")], str(tmp_path / "x.png"))
    ax_loss, ax_tok = fig.axes
    labels = [t.get_text() for t in ax_loss.get_legend().get_texts()]
    assert labels == ["a train (per step)", "a train (eval)", "a val",
                      "b train (per step)", "b train (eval)", "b val"]
    val = ax_loss.lines[2]
    assert list(val.get_xdata()) == [0, 5, 10] and val.get_ydata()[-1] == pytest.approx(4.0 - 0.9)
    assert [t.get_text() for t in ax_tok.get_legend().get_texts()] == ["a"]
    assert list(ax_tok.lines[0].get_ydata()) == [25600.0 + i for i in range(11)]
    assert (tmp_path / "x.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_command_line(tmp_path):
    pytest.importorskip("matplotlib")
    write_log(tmp_path / "run.jsonl", 10, 4.0)
    r = subprocess.run([sys.executable, PLOT, "run.jsonl"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "run.png").read_bytes()[:4] == b"\x89PNG"  # default: beside the log
    assert str(tmp_path / "run.png") in r.stdout
    (tmp_path / "bad.jsonl").write_text('{"iter": 0, "loss": 1.0}\nnot json\n')
    for bad, words in (("missing.jsonl", "missing.jsonl"), ("bad.jsonl", "bad.jsonl:2")):
        r = subprocess.run([sys.executable, PLOT, bad], cwd=tmp_path, capture_output=True, text=True)
        assert r.returncode == 1 and words in r.stderr and "Traceback" not in r.stderr, r.stderr
