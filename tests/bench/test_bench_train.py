"""bench/bench_train.py end to end on a CPU (its --tiny smoke mode) and its kernel classifier."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench"))

import bench_train  # noqa: E402


@pytest.mark.parametrize("name,family", [
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1", "GEMM"),
    ("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NTT", "GEMM"),
    ("void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_128x2_tn_align8>", "GEMM"),
    ("cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_64x64x64_4x1x1_kernel0_0", "attention"),
    ("void pytorch_flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits>", "attention"),
    ("void tk::attention_fwd_kernel<64, true>(tk::gl<bf16>, float)", "attention"),
    ("void bwd_dkdv_split_kernel<128>(Params)", "attention"),
    ("void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>", "LayerNorm"),
    ("triton_per_fused_add_native_layer_norm_3", "LayerNorm"),
    ("triton_poi_fused_gelu_5", "fused (triton)"),
    ("triton_red_fused__log_softmax_nll_loss_forward_7", "loss"),
    ("void at::native::(anonymous namespace)::nll_loss_forward_reduce_cuda_kernel_2d<float>", "loss"),
    ("void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>", "optimizer"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl>", "elementwise"),
    ("Memcpy DtoD (Device -> Device)", "other"),
    ("aten::addmm", "GEMM"),
])
def test_classify(name, family):
    assert bench_train.classify(name) == family


def test_tiny_cpu_run_writes_json_and_png(tmp_path):
    out = tmp_path / "out"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, os.path.join(REPO, "bench", "bench_train.py"), "--device=cpu",
                        "--tiny", "--profile", "--power", "--out", str(out)], env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    data = json.loads((out / "bench_train.json").read_text())
    modes = {(x["kernels"], x["compile"]): x for x in data["results"]}
    assert set(modes) == {("torch", "eager"), ("torch", "compile"), ("tk", "eager"), ("tk", "compile")}
    for compiled in ("eager", "compile"):
        ok = modes[("torch", compiled)]
        assert "error" not in ok, ok
        assert ok["tokens_per_s"] > 0 and ok["ms_per_iter"] > 0 and ok["mfu"] is None  # no MFU on a CPU
        assert ok["tokens_per_s"] == pytest.approx(4 * 64 / (ok["ms_per_iter"] / 1000), rel=1e-3)
        assert sum(ok["profile_ms"].values()) > 0 and set(ok["profile_ms"]) == set(bench_train.FAMILIES)
        assert ok["power"] is None and "CUDA device" in ok["power_note"]  # --power on a CPU: reported, no crash
        # a failing mode is reported and the run goes on
        assert "kernels=tk" in modes[("tk", compiled)]["error"]
    assert data["env"]["iters"] == 2 and data["env"]["device"] == "cpu"
    assert "tiny" in r.stdout and "error: kernels=tk" in r.stdout and "Traceback" not in r.stdout + r.stderr
    assert (out / "bench_train.png").stat().st_size > 0


def test_bad_arguments_give_one_clear_error(tmp_path):
    r = subprocess.run([sys.executable, os.path.join(REPO, "bench", "bench_train.py"), "--device=cpu",
                        "--models", "gpt5", "--out", str(tmp_path)], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 1 and "unknown gpt5" in r.stderr and "Traceback" not in r.stderr


def test_parse_power_samples():
    text = "1755, 698.52\n1980, 120.0\n[N/A], [N/A]\nFailed to initialize NVML\n1500, 701.48\n"
    p = bench_train.parse_power_samples(text)
    assert p == dict(sm_mhz=pytest.approx((1755 + 1980 + 1500) / 3, abs=0.05),
                     watts=pytest.approx((698.52 + 120.0 + 701.48) / 3, abs=0.05), samples=3)
    assert bench_train.parse_power_samples("") is None
    assert bench_train.parse_power_samples("No devices were found\n") is None


def test_power_sampler_runs_nvidia_smi_and_stops_it(tmp_path, monkeypatch):
    """The sampler's subprocess plumbing, with a stand-in nvidia-smi on PATH that prints two samples and then
    waits to be stopped (as the real one does with -lms); the device is never touched (its id is patched)."""
    fake = tmp_path / "nvidia-smi"
    fake.write_text("#!/bin/sh\necho \"$@\" > " + str(tmp_path / "args") + "\n"
                    "echo '1600, 690.0'\necho '1700, 650.0'\nexec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ["PATH"])
    monkeypatch.setattr(bench_train.PowerSampler, "_gpu_id", lambda self: "00000000:3B:00.0")
    import time
    with bench_train.PowerSampler(bench_train.torch.device("cuda", 0)) as ps:
        time.sleep(0.5)
    assert ps.result == dict(sm_mhz=1650.0, watts=670.0, samples=2), ps.note
    assert ps.proc.poll() is not None  # stopped
    args = (tmp_path / "args").read_text().split()
    assert args[:2] == ["-i", "00000000:3B:00.0"] and "--query-gpu=clocks.sm,power.draw" in args and "50" in args
    with bench_train.PowerSampler(bench_train.torch.device("cpu")) as ps:
        pass
    assert ps.result is None and ps.proc is None
