"""CPU tests of tk_kernels/build.py: architecture parsing, the cache key, the build pipeline on a
tiny extension (success, failure, concurrent builders), and the real ahead-of-time build
`python -m tk_kernels.build --arch sm_80 --arch sm_90a` (needs nvcc; takes minutes on 2 cores)."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tk_kernels import build as tkb

REPO_ROOT = Path(__file__).resolve().parents[1]


def _need_nvcc():
    if tkb.find_cuda_home() is None:
        pytest.skip("no CUDA toolkit (nvcc) found: set CUDA_HOME or put nvcc on PATH to run build tests")


def _env(tmp_path, **extra):
    env = dict(os.environ)
    env["TORCH_EXTENSIONS_DIR"] = str(tmp_path / "ext")
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("TK_ARCH", None)
    env.update(extra)
    return env


# -----------------------------------------------------------------------------
# architectures and flags

@pytest.mark.parametrize("text,expected", [
    ("sm_80", "sm_80"), ("SM_86", "sm_86"), ("89", "sm_89"), ("8.0", "sm_80"), ("sm_90", "sm_90"),
    ("sm_90a", "sm_90a"), ("9.0a", "sm_90a"), ("compute_90a", "sm_90a"), ("sm_100a", "sm_100a"),
    ("12.0", "sm_120"),
])
def test_parse_arch(text, expected):
    assert tkb.parse_arch(text) == expected


@pytest.mark.parametrize("text", ["sm_75", "7.0", "ampere", "sm_", "", "sm_90b"])
def test_parse_arch_rejects(text):
    with pytest.raises(ValueError, match="sm_80"):
        tkb.parse_arch(text)


def test_arch_list_env_and_explicit(monkeypatch):
    assert tkb.parse_arch_list("sm_90a,sm_80; sm_80 8.6") == ["sm_80", "sm_86", "sm_90a"]
    monkeypatch.setenv("TK_ARCH", "sm_89")
    assert tkb.resolve_archs() == ["sm_89"]
    assert tkb.resolve_archs(["sm_90a", "sm_80"]) == ["sm_80", "sm_90a"]  # explicit wins
    monkeypatch.delenv("TK_ARCH")
    if not torch.cuda.is_available():
        assert tkb.resolve_archs() == tkb.DEFAULT_AOT_ARCHS


def test_arch_for_capability():
    assert tkb.arch_for_capability(9, 0) == "sm_90a"
    assert tkb.arch_for_capability(8, 0) == "sm_80"
    assert tkb.arch_for_capability(8, 9) == "sm_89"
    assert tkb.arch_for_capability(12, 0) == "sm_120"


def test_arch_runs_on():
    assert tkb.arch_runs_on("sm_80", 8, 0) and tkb.arch_runs_on("sm_80", 8, 6) and tkb.arch_runs_on("sm_80", 8, 9)
    assert not tkb.arch_runs_on("sm_86", 8, 0)
    assert not tkb.arch_runs_on("sm_80", 9, 0)  # no PTX: a new major needs its own cubin
    assert tkb.arch_runs_on("sm_90a", 9, 0) and tkb.arch_runs_on("sm_90", 9, 0)
    assert not tkb.arch_runs_on("sm_90a", 10, 0)


def test_gencode_flags_and_torch_adds_no_arch_flags():
    archs = ["sm_80", "sm_90a"]
    assert tkb.gencode_flags(archs) == ["-gencode=arch=compute_80,code=sm_80",
                                        "-gencode=arch=compute_90a,code=sm_90a"]
    cflags, cuda_flags = tkb.compile_flags(archs, verbose_ptxas=True)
    assert "-Xptxas=-v" in cuda_flags and "-O3" in cflags and "-std=c++20" in cuda_flags
    assert "-Xptxas=-v" not in tkb.compile_flags(archs, verbose_ptxas=False)[1]
    from torch.utils import cpp_extension
    if hasattr(cpp_extension, "_get_cuda_arch_flags"):
        # our -gencode flags must stop cpp_extension from adding its own (private API, checked
        # because torch's rule is "any user nvcc flag containing 'arch'")
        assert cpp_extension._get_cuda_arch_flags(cuda_flags) == []


def test_find_cuda_home_prefers_env(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert tkb.find_cuda_home() == str(tmp_path)
    monkeypatch.delenv("CUDA_HOME")
    monkeypatch.setenv("CUDA_PATH", str(tmp_path / "x"))
    assert tkb.find_cuda_home() == str(tmp_path / "x")


# -----------------------------------------------------------------------------
# cache key

def _copy_pkg(tmp_path) -> Path:
    pkg = tmp_path / "pkg"
    (pkg / "include").mkdir(parents=True)
    shutil.copytree(tkb.CSRC_DIR, pkg / "csrc")
    if tkb.INCLUDE_DIR.is_dir():
        shutil.copytree(tkb.INCLUDE_DIR, pkg / "include", dirs_exist_ok=True)
    (pkg / "include" / "sub").mkdir(exist_ok=True)
    (pkg / "include" / "sub" / "extra.cuh").write_text("// a nested header\n")
    (pkg / "include" / "NOTES.md").write_text("docs do not affect the build\n")
    return pkg


def test_cache_key_covers_sources_flags_archs_versions(tmp_path, monkeypatch):
    pkg = _copy_pkg(tmp_path)
    archs = ["sm_80"]
    monkeypatch.delenv("TK_EXTRA_NVCC_FLAGS", raising=False)
    cflags, cuda_flags = tkb.compile_flags(archs, verbose_ptxas=False)
    key = lambda **kw: tkb.cache_key(kw.pop("archs", archs), kw.pop("cflags", cflags),
                                     kw.pop("cuda_flags", cuda_flags), pkg_dir=pkg, **kw)
    base = key()
    assert base == key()  # deterministic
    assert len(base) == 16

    # a nested header changes the key, and changing it back restores it
    hdr = pkg / "include" / "sub" / "extra.cuh"
    hdr.write_text("// a nested header, edited\n")
    assert key() != base
    hdr.write_text("// a nested header\n")
    assert key() == base
    # the launcher interface header and a new .cu file too
    (pkg / "csrc" / "attention.h").write_text((pkg / "csrc" / "attention.h").read_text() + "\n// x\n")
    edited = key()
    assert edited != base
    (pkg / "csrc" / "new_kernel.cu").write_text("// new\n")
    assert key() != edited
    (pkg / "csrc" / "new_kernel.cu").unlink()
    assert key() == edited
    # documentation does not
    (pkg / "include" / "NOTES.md").write_text("edited docs\n")
    assert key() == edited
    # flags, archs, torch and CUDA versions do
    assert key(archs=["sm_90a"]) != edited
    assert key(cuda_flags=cuda_flags + ["-DFOO"]) != edited
    assert key(cflags=cflags + ["-g"]) != edited
    assert key(torch_version="0.0.1") != edited
    assert key(cuda_version="99.9") != edited
    # so do extra nvcc flags from the environment
    monkeypatch.setenv("TK_EXTRA_NVCC_FLAGS", "-DTK_TEST_KNOB=1")
    extra = tkb.compile_flags(archs, verbose_ptxas=False)[1]
    assert "-DTK_TEST_KNOB=1" in extra and key(cuda_flags=extra) != edited
    monkeypatch.delenv("TK_EXTRA_NVCC_FLAGS")
    # ptxas verbosity changes no code, so no rebuild
    assert key(cuda_flags=tkb.compile_flags(archs, verbose_ptxas=True)[1]) == edited


def test_sources_are_bindings_and_every_cu():
    files = tkb.source_files()
    assert files[0].name == "bindings.cpp"
    assert sorted(p.name for p in files[1:]) == sorted(p.name for p in tkb.CSRC_DIR.glob("*.cu"))


# -----------------------------------------------------------------------------
# the pipeline on a tiny extension (seconds, not minutes)

TINY_BINDINGS = """\
#include <pybind11/pybind11.h>
#include "tiny.h"
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("answer", &tiny_answer); }
"""
TINY_HEADER = "#pragma once\nint tiny_answer();\n"
TINY_CU = """\
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "tiny.h"
__global__ void tiny_kernel(__nv_bfloat16 *x, __half *y) { x[0] = x[0] + x[1]; y[0] = y[0] * y[1]; }
int tiny_answer() { return 42; }
"""


def _tiny_pkg(tmp_path, bindings=TINY_BINDINGS) -> Path:
    pkg = tmp_path / "tiny"
    (pkg / "csrc").mkdir(parents=True)
    (pkg / "include").mkdir()
    (pkg / "csrc" / "bindings.cpp").write_text(bindings)
    (pkg / "include" / "tiny.h").write_text(TINY_HEADER)
    (pkg / "csrc" / "tiny.cu").write_text(TINY_CU)
    return pkg


def test_tiny_build_loads_and_is_cached(tmp_path, monkeypatch, capsys):
    _need_nvcc()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    pkg = _tiny_pkg(tmp_path)
    module, lib = tkb.build(["sm_80", "sm_90a"], pkg_dir=pkg)
    assert module.answer() == 42 and module.tk_archs == ("sm_80", "sm_90a")
    assert lib.is_file() and lib.parent.parent == tmp_path / "ext"
    assert lib.name.startswith("tk_kernels_")
    assert "this takes a few minutes" in capsys.readouterr().err
    mtime = lib.stat().st_mtime_ns
    module2, lib2 = tkb.build(["sm_90a", "sm_80"], pkg_dir=pkg)  # same key: no rebuild, no message
    assert lib2 == lib and lib.stat().st_mtime_ns == mtime
    assert "this takes a few minutes" not in capsys.readouterr().err
    # a header edit gives a new build directory
    (pkg / "include" / "tiny.h").write_text(TINY_HEADER + "// edited\n")
    _, lib3 = tkb.build(["sm_80", "sm_90a"], pkg_dir=pkg, quiet=True)
    assert lib3 != lib and lib3.is_file()


def test_tiny_build_failure_raises_one_clear_error(tmp_path, monkeypatch):
    _need_nvcc()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    pkg = _tiny_pkg(tmp_path, bindings="// empty: only the broken kernel file compiles\n")
    (pkg / "csrc" / "tiny.cu").write_text(TINY_CU + "\nthis_is_not_cuda_code;\n")
    with pytest.raises(tkb.TKBuildError) as info:
        tkb.build(["sm_80"], pkg_dir=pkg, quiet=True)
    msg = str(info.value)
    assert "tk_kernels build failed" in msg and "this_is_not_cuda_code" in msg
    log = Path(msg.split("Full compiler log: ")[1].splitlines()[0])
    assert log.is_file() and "this_is_not_cuda_code" in log.read_text()
    assert isinstance(info.value, RuntimeError)
    # a retry in the same process compiles again (and fails the same way), it does not try to
    # import a library that was never built
    with pytest.raises(tkb.TKBuildError, match="this_is_not_cuda_code"):
        tkb.build(["sm_80"], pkg_dir=pkg, quiet=True)


def test_tiny_build_concurrent_builders(tmp_path):
    """Several processes (like torchrun ranks) building the same extension at once all succeed.
    They import torch.utils.cpp_extension first without CUDA_HOME set (as torch.compile does), so
    torch guesses CUDA_HOME from PATH on its own; the build must still use the resolved one."""
    _need_nvcc()
    pkg = _tiny_pkg(tmp_path)
    code = ("import sys, torch.utils.cpp_extension; from tk_kernels import build as b; "
            f"m, lib = b.build(['sm_80'], pkg_dir={str(pkg)!r}, quiet=True); "
            "assert m.answer() == 42; print(lib)")
    env = _env(tmp_path)
    if os.path.isfile("/usr/local/cuda/bin/nvcc") or shutil.which("nvcc"):  # found without env vars
        env.pop("CUDA_HOME", None)
        env.pop("CUDA_PATH", None)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert len({out.strip().splitlines()[-1] for out, _ in outs}) == 1


def test_cli_rejects_bad_arch(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tk_kernels.build", "--arch", "sm_70"], env=_env(tmp_path),
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "sm_80" in r.stderr


# -----------------------------------------------------------------------------
# the real build (minutes): must fail, not skip, if the kernels do not compile

def test_cli_builds_real_kernels_for_sm80_and_sm90a(tmp_path):
    _need_nvcc()
    assert list(tkb.CSRC_DIR.glob("*.cu")), "no kernel sources (tk_kernels/csrc/*.cu) to build"
    r = subprocess.run([sys.executable, "-m", "tk_kernels.build", "--arch", "sm_80", "--arch", "sm_90a"],
                       env=_env(tmp_path), cwd=REPO_ROOT, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, f"build failed:\n{r.stderr[-6000:]}"
    lib = Path(r.stdout.strip().splitlines()[-1])
    assert lib.is_file(), r.stdout
    assert str(lib).startswith(str(tmp_path / "ext"))
    assert "this takes a few minutes" in r.stderr
    # attention.py's shared-memory gate uses the number the kernels compute (no GPU needed to ask)
    spec = importlib.util.spec_from_file_location(lib.stem, lib)
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)  # loads without a GPU (torch's CUDA build brings the runtime)
    from tk_kernels.attention import MIN_SMEM_BYTES
    assert ext.min_smem_bytes() == MIN_SMEM_BYTES
