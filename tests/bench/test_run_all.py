"""bench/run_all.py on a CPU: runs the selected benchmarks, records a failing one and goes on, and
owns exactly one block of RESULTS.md (replaced, not appended, on the next run; the rest is kept)."""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

import run_all  # noqa: E402

HAND_WRITTEN = "# Benchmark results\n\nintro\n\n<!-- results below, newest first -->\n\n## old section, kept\n| a |\n"


def test_block_is_inserted_then_replaced(tmp_path):
    results = tmp_path / "RESULTS.md"
    results.write_text(HAND_WRITTEN)
    args = ["--benches", "train,attention", "--train-args", "--device=cpu --tiny --kernels torch",
            "--out", str(tmp_path / "out"), "--results", str(results), "--timeout", "600"]
    rc = run_all.main(args)
    assert rc == 1  # bench_attention needs a GPU: recorded as failed, the train benchmark still ran
    text = results.read_text()
    assert text.count(run_all.BEGIN) == 1 and text.count(run_all.END) == 1
    assert text.index("newest first") < text.index(run_all.BEGIN) < text.index("## old section, kept")
    block = text.split(run_all.BEGIN)[1].split(run_all.END)[0]
    assert "### train: " in block and "tok/s" in block and "torch " in block and "cuDNN" in block
    assert "### attention: " in block and "FAILED" in block
    assert (tmp_path / "plots" / "bench_train.png").stat().st_size > 0
    assert "![bench_train](plots/bench_train.png)" in block
    # --merge: re-running one benchmark keeps the other's section as it was, its own env line included
    train_part = block.split("<!-- bench:train -->")[1]
    (tmp_path / "out1").mkdir()
    (tmp_path / "out1" / "bench_layernorm.png").write_bytes(b"stale")  # another benchmark's old plot: not copied
    rc = run_all.main(["--benches", "attention", "--merge", "--out", str(tmp_path / "out1"), "--results", str(results)])
    assert rc == 1
    text = results.read_text()
    assert text.count(run_all.BEGIN) == 1 and text.count("<!-- bench:") == 2 and "## old section, kept" in text
    merged = text.split(run_all.BEGIN)[1].split(run_all.END)[0]
    assert merged.index("<!-- bench:attention -->") < merged.index("<!-- bench:train -->")  # BENCHES order
    assert merged.split("<!-- bench:train -->")[1].split("\n![")[0].rstrip() == train_part.split("\n![")[0].rstrip()
    assert "--merge" in merged and "![bench_train](plots/bench_train.png)" in merged
    assert not (tmp_path / "plots" / "bench_layernorm.png").exists() and "bench_layernorm" not in merged
    rc = run_all.main(["--benches", "train", "--train-args", "--device=cpu --tiny --kernels torch",
                       "--out", str(tmp_path / "out2"), "--results", str(results)])
    assert rc == 0
    text = results.read_text()
    assert text.count(run_all.BEGIN) == 1 and "### attention" not in text and "## old section, kept" in text


def test_unknown_benchmark_is_one_clear_error(capsys):
    assert run_all.main(["--benches", "mlpp"]) == 2
    assert "unknown benchmark mlpp" in capsys.readouterr().err
