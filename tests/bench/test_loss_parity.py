"""bench/loss_parity.py: its comparison, and both runs end to end on a CPU (a tiny model, kernels=torch vs auto)."""

import json
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

import loss_parity  # noqa: E402

SHAKESPEARE = os.path.join(os.path.dirname(REPO), "shared", "data", "shakespeare", "input.txt")
BPE = os.path.join(os.path.dirname(REPO), "shared", "data", "gpt2", "r50k_base.tiktoken")


def test_compare_flags_the_largest_difference_and_missing_evals():
    a = {0: (4.0, 4.0), 50: (2.0, 2.5)}
    ok = loss_parity.compare(a, {0: (4.0, 4.02), 50: (2.01, 2.5)}, tol=0.01)
    assert ok["ok"] and ok["max_rel"] == pytest.approx(0.005)
    far = loss_parity.compare(a, {0: (4.0, 4.0), 50: (2.0, 2.6)}, tol=0.01)
    assert not far["ok"] and far["max_rel"] == pytest.approx(0.04)
    missing = loss_parity.compare(a, {0: (4.0, 4.0)}, tol=0.01)
    assert not missing["ok"] and missing["rows"][-1] == dict(iter=50, missing="B")
    assert not loss_parity.compare({}, {}, tol=0.01)["ok"]  # nothing compared is no parity


def test_gpt2_run_schedules():
    config = loss_parity.train_args("gpt2", 300, 50)  # the first 300 steps of config/train_gpt2.py's schedule
    assert "--warmup_iters=2000" in config and "--lr_decay_iters=600000" in config and "--dataset=shakespeare" in config
    short = loss_parity.train_args("gpt2", 300, 50, schedule="short")  # a whole schedule in 300 steps
    assert "--lr_decay_iters=300" in short and "--warmup_iters=30" in short
    assert loss_parity.train_args("shakespeare_char", 300, 50, schedule="short") == \
        loss_parity.train_args("shakespeare_char", 300, 50)  # its config's own schedule either way


@pytest.mark.skipif(not (os.path.exists(SHAKESPEARE) and os.path.exists(BPE)), reason="needs ../shared/data")
def test_tiny_cpu_runs_agree_and_a_negative_tolerance_fails(tmp_path):
    pytest.importorskip("tiktoken")
    common = ["--device", "cpu", "--tiny", "--kernels", "torch,auto", "--compile", "False", "--iters", "6",
              "--eval_interval", "3", "--input", SHAKESPEARE, "--bpe", BPE]
    out = tmp_path / "out"
    assert loss_parity.main(common + ["--out", str(out)]) == 0
    res = json.loads((out / "loss_parity.json").read_text())
    for run in ("shakespeare_char", "gpt2"):
        assert res[run]["ok"] and [r["iter"] for r in res[run]["rows"]] == [0, 3, 6]
        assert res[run]["max_rel"] == 0.0  # kernels=auto is PyTorch on a CPU: the same run, bitwise
    # the same runs judged against an impossible tolerance: the script must say no
    bad = tmp_path / "bad"
    assert loss_parity.main(common + ["--runs", "shakespeare_char", "--tol", "-1", "--out", str(bad)]) == 1


def test_run_env_reads_name_value_items():
    assert loss_parity.run_env(["TK_TORCH_FAMILIES=mlp,layer_norm", "X="]) == {
        "TK_TORCH_FAMILIES": "mlp,layer_norm", "X": ""}
    for bad in (["TK_TORCH_FAMILIES"], ["=mlp"]):
        with pytest.raises(ValueError, match="NAME=VALUE"):
            loss_parity.run_env(bad)
    assert loss_parity.main(["--a_env", "nothing", "--device", "cpu"]) == 2  # refused before any run starts


@pytest.mark.skipif(not os.path.exists(SHAKESPEARE), reason="needs ../shared/data")
def test_a_env_reaches_the_first_run_only(tmp_path):
    # a family name that does not exist makes train.py refuse to start: only the run given it fails
    out = tmp_path / "out"
    rc = loss_parity.main(["--device", "cpu", "--tiny", "--kernels", "auto,auto", "--compile", "False", "--iters",
                           "2", "--eval_interval", "2", "--input", SHAKESPEARE, "--runs", "shakespeare_char",
                           "--a_env", "TK_TORCH_FAMILIES=no_such_family", "--out", str(out)])
    assert rc == 1
    codes = json.loads((out / "loss_parity.json").read_text())["shakespeare_char"]["returncodes"]
    assert codes["auto_a"] != 0 and codes["auto_b"] == 0
    assert "no_such_family" in (out / "shakespeare_char_auto_a.log").read_text()
