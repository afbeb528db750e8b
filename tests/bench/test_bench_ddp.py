"""bench/bench_ddp.py on a CPU: the whole flow (scaling, loss check, resume check) with gloo, a tiny model,
shakespeare_char and N in {1, 2}; the checks' verdicts on made-up logs (they can fail); the build-line
parser; the children's environment (NVLink multicast off); bad arguments."""

import json
import os
import signal
import subprocess
import sys
import time
from types import SimpleNamespace

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

import bench_ddp  # noqa: E402

SCRIPT = os.path.join(REPO, "bench", "bench_ddp.py")


def test_cpu_run_passes_every_check_and_writes_its_files(char_data, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, SCRIPT, "--device", "cpu", "--data_dir", char_data, "--gpus", "1,2",
                        "--warmup", "1", "--iters", "2", "--check_iters", "6", "--check_accum", "2",
                        "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-3000:]
    assert "all runs finished and all checks passed" in r.stdout and "Traceback" not in r.stdout + r.stderr
    (json_path,) = (tmp_path / "out").glob("bench_ddp_cpu_*.json")
    res = json.loads(json_path.read_text())
    assert res["ok"] and res["env"]["device"] == "cpu"
    assert [r["rc"] for r in res["runs"]] == [0] * 9  # 2 scaling, ref, control, N = 1, 2, part, resume, other N

    scaling = {row["n"]: row for row in res["scaling"]}
    assert set(scaling) == {1, 2} and all("error" not in row for row in scaling.values())
    assert scaling[1]["efficiency"] == 1.0 and scaling[2]["efficiency"] > 0
    for n, row in scaling.items():
        assert row["tokens_per_s"] > 0 and abs(row["tokens_per_s_per_gpu"] * n - row["tokens_per_s"]) < 1e-6
        assert f"--nproc_per_node={n}" in row["command"] and f"--gradient_accumulation_steps={n}" in row["command"]

    (loss,) = res["loss"]
    assert loss["ok"] and loss["global_accum"] == 4 and loss["tol"] == 1e-5
    rows = {row["n"]: row for row in loss["rows"]}
    assert rows[1]["bitwise"]  # torchrun with one process is the plain run
    assert rows[2]["ok"] and rows[2]["max_rel"] <= 1e-5
    assert loss["control_max_rel"] > 100 * loss["tol"] and loss["discriminates"]

    (resume,) = res["resume"]
    assert resume["ok"] and resume["n"] == 2 and resume["k"] == 3 and resume["same_n_bitwise"]
    assert resume["other_n"] == 1 and resume["other_n_ok"]
    assert resume["warning"].startswith("warning: the checkpoint's RNG states are for 2 process(es), this run has 1")

    block = json_path.with_suffix(".md").read_text()
    assert block.startswith("## DDP: scaling, loss check, resume (bench/bench_ddp.py), CPU (gloo), ")
    for words in ("torch ", "NCCL_NVLS_ENABLE=0", "Command: `python bench/bench_ddp.py --device cpu",
                  "| torch | 2 |", "Loss check, kernels=torch", "bitwise equal to the uninterrupted run",
                  "python -m torch.distributed.run --standalone --nproc_per_node=2 train.py",
                  "TK_DETERMINISTIC=1 python train.py"):
        assert words in block, words
    assert (tmp_path / "work" / "logs" / "loss_n2_torch.log").is_file()

    # parts of a session (here: the run's JSON split in two) merged into one report
    scaling_part = dict(res, loss=[], resume=[], runs=res["runs"][:2])
    checks_part = dict(res, scaling=[], runs=res["runs"][2:], commands=[["python bench/bench_ddp.py --checks "
                                                                          "loss,resume", 60.0]])
    (tmp_path / "a.json").write_text(json.dumps(scaling_part))
    (tmp_path / "b.json").write_text(json.dumps(checks_part))
    m = subprocess.run([sys.executable, SCRIPT, "--merge", str(tmp_path / "a.json"), str(tmp_path / "b.json")],
                       capture_output=True, text=True, timeout=300)
    assert m.returncode == 0, m.stdout + m.stderr
    merged = (tmp_path / "a_merged.md").read_text()
    assert "Commands: `python bench/bench_ddp.py --device cpu" in merged and "--checks loss,resume` (60 s)" in merged
    for words in ("| torch | 2 |", "Loss check, kernels=torch", "bitwise equal to the uninterrupted run",
                  "- loss check, kernels=torch: pass"):
        assert words in merged, words
    assert json.loads((tmp_path / "a_merged.json").read_text())["ok"]


def test_interrupt_ends_the_running_group_and_reports_what_finished(char_data, tmp_path):
    """A time limit's SIGINT in the middle of a torchrun run: torchrun and its workers are ended (no rank is
    left holding a device) and the report has the runs that finished."""
    work = tmp_path / "work"
    p = subprocess.Popen([sys.executable, SCRIPT, "--device", "cpu", "--data_dir", char_data, "--checks", "scaling",
                          "--warmup", "1", "--iters", "3000", "--out", str(tmp_path / "out"), "--work", str(work)],
                         env=dict(os.environ, OMP_NUM_THREADS="1"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.time() + 600
    while not (work / "logs" / "scaling_torch_n1.log").exists() and p.poll() is None and time.time() < deadline:
        time.sleep(0.5)
    time.sleep(8)  # the 2-process run is under way
    assert p.poll() is None, p.communicate()
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1 and "interrupted" in out, out[-3000:] + err[-3000:]
    (json_path,) = (tmp_path / "out").glob("bench_ddp_cpu_*_scaling.json")
    res = json.loads(json_path.read_text())
    assert [(r["name"], r["rc"]) for r in res["runs"]] == [("scaling_torch_n1", 0), ("scaling_torch_n2", "interrupted")]
    assert res["scaling"][0]["tokens_per_s"] > 0 and not res["ok"]
    time.sleep(1)
    left = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if char_data.encode() in f.read():  # train.py's --data_dir
                    left.append(pid)
        except OSError:
            pass
    assert not left, left


def fake_runner(losses: dict, tol=1e-5, gpus=(1, 2)):
    """A Runner whose runs return made-up logs: losses maps a run name (without kernels) to its losses."""
    args = SimpleNamespace(check_iters=6, check_accum=1, tol=tol, check_compile=False, seed=1337)

    class Fake:
        def __init__(self):
            self.args, self.work, self.runs = args, "", []

        def train_args(self, kernels, accum, out, log, data_dir, **over):
            return dict(over, out=out, data_dir=data_dir)

        def run(self, name, nproc, a, deterministic=False):
            key = name.rsplit("_", 1)[0]
            self.runs.append(dict(name=name, command=key, rc=0, builds=[]))
            ls = losses[key]
            stdout = "warning: the checkpoint's RNG states are for 2 process(es), this run has 1; ..." \
                if key == "resume_other_n" else ""
            start = 3 if key.startswith("resume_") and key != "resume_part" else 0
            return dict(command=key, stdout=stdout, log=dict(
                steps={start + i: {"loss": x} for i, x in enumerate(ls)}, evals={6: {"val_loss": 1.0}}))

    return Fake()


def test_check_verdicts_can_fail(monkeypatch):
    monkeypatch.setattr(bench_ddp.shutil, "copytree", lambda *a, **k: None)
    good = [4.0, 3.9, 3.8, 3.7, 3.6, 3.5, 3.4]
    base = dict(loss_ref=good, loss_control=[4.1, 3.7, 3.9, 3.5, 3.7, 3.3, 3.5], loss_n1=good, loss_n2=good,
                resume_part=good[:4], resume_same_n=good[3:], resume_other_n=good[3:6])
    loss, resume = bench_ddp.run_checks(fake_runner(base), "torch", [1, 2], "d", "c")
    assert loss["ok"] and resume["ok"] and resume["same_n_bitwise"] and resume["other_n_ok"]
    # N = 2 off by 1e-3 at iteration 2
    off = good[:2] + [good[2] * 1.001] + good[3:]
    loss, _ = bench_ddp.run_checks(fake_runner(dict(base, loss_n2=off)), "torch", [1, 2], "d", "c")
    rows = {r["n"]: r for r in loss["rows"]}
    assert not loss["ok"] and not rows[2]["ok"] and rows[2]["at_iter"] == 2 and rows[1]["ok"]
    # a control as close as the tolerance: the check could not fail, so it does not pass
    loss, _ = bench_ddp.run_checks(fake_runner(dict(base, loss_control=good)), "torch", [1, 2], "d", "c")
    assert not loss["discriminates"] and not loss["ok"]
    # a resume one ulp off, and a resume on another count that changes batches
    _, resume = bench_ddp.run_checks(fake_runner(dict(base, resume_same_n=[3.7, 3.6000001, 3.5, 3.4])),
                                     "torch", [1, 2], "d", "c")
    assert not resume["same_n_bitwise"] and not resume["ok"]
    _, resume = bench_ddp.run_checks(fake_runner(dict(base, resume_other_n=[3.7, 3.65, 3.5])), "torch", [1, 2],
                                     "d", "c")
    assert not resume["other_n_ok"] and not resume["ok"]


def test_parse_builds():
    text = ("noise\ntk_kernels: attention: building tk_attention_x for sm_90a ... (this takes a few minutes)\n"
            "tk_kernels: attention: built in 93.4 s (rank 0, waited 0.0 s for the build lock)\n"
            "tk_kernels: attention: cached: /x/tk_attention_x (rank 1, waited 93.6 s for the build lock)\n"
            "tk_kernels: layernorm: cached: /x/tk_layernorm_y (waited 0.0 s for the build lock)\n")
    assert bench_ddp.parse_builds(text) == [
        dict(family="attention", rank=0, built=True, build_s=93.4, wait_s=0.0),
        dict(family="attention", rank=1, built=False, build_s=None, wait_s=93.6),
        dict(family="layernorm", rank=None, built=False, build_s=None, wait_s=0.0)]


def test_children_run_with_nvlink_multicast_off(monkeypatch, tmp_path):
    seen = {}

    class FakePopen:
        returncode = 0

        def __init__(self, cmd, cwd, env, **kwargs):
            seen.update(cmd=cmd, env=env, session=kwargs.get("start_new_session"))

        def communicate(self, timeout=None):
            return "", ""

    monkeypatch.setattr(bench_ddp.subprocess, "Popen", FakePopen)
    runner = bench_ddp.Runner(SimpleNamespace(timeout=10), str(tmp_path))
    runner.run("x", 4, ["--log_file=x.jsonl"], deterministic=True)
    assert seen["cmd"][1:5] == ["-m", "torch.distributed.run", "--standalone", "--nproc_per_node=4"]
    assert seen["session"]  # its own process group, ended as a whole on a timeout or an interrupt
    for k, v in (("NCCL_NVLS_ENABLE", "0"), ("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"), ("NVSHMEM_DISABLE_NVLS", "1"),
                 ("TK_DETERMINISTIC", "1")):
        assert seen["env"][k] == v


def test_bad_arguments_give_one_clear_error(tmp_path):
    for args, words in ((["--device", "cpu", "--kernels", "tk"], "kernels=tk needs CUDA GPUs"),
                        (["--device", "cpu", "--checks", "speed"], "unknown --checks speed"),
                        (["--device", "cpu", "--gpus", "0,2"], "--gpus must be"),
                        (["--device", "cpu", "--data_dir", str(tmp_path)], "has no train.bin")):
        r = subprocess.run([sys.executable, SCRIPT, *args, "--out", str(tmp_path)], capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 2 and words in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
