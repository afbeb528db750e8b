"""CPU tests of tk_kernels/build.py: architecture parsing, the per-family cache key, the build pipeline
on a tiny extension (success, failure, concurrent builders), the source layout rules (shipped kernel sources
and DSL headers have no compile-time TK_* tuning macros; only each family's bindings.cpp includes torch; no
inline PTX outside tk_kernels/include/), and the real ahead-of-time build
`python -m tk_kernels.build --arch sm_80 --arch sm_90a` (needs nvcc; takes minutes on 2 cores) with its SASS (no
kernel touches local memory; the Hopper kernels show HGMMA and UTMALDG; read with cuobjdump)."""

import importlib.util
import os
import re
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

ATTN_CSRC = tkb.FAMILIES_DIR / "attention" / "csrc"


def _copy_pkg(tmp_path) -> Path:
    pkg = tmp_path / "pkg"
    (pkg / "include").mkdir(parents=True)
    shutil.copytree(ATTN_CSRC, pkg / "families" / "attention" / "csrc")
    (pkg / "families" / "other" / "csrc").mkdir(parents=True)
    (pkg / "families" / "other" / "csrc" / "other.cu").write_text("// another family\n")
    if tkb.INCLUDE_DIR.is_dir():
        shutil.copytree(tkb.INCLUDE_DIR, pkg / "include", dirs_exist_ok=True)
    (pkg / "include" / "sub").mkdir(exist_ok=True)
    (pkg / "include" / "sub" / "extra.cuh").write_text("// a nested header\n")
    (pkg / "include" / "NOTES.md").write_text("docs do not affect the build\n")
    return pkg


def test_cache_key_covers_sources_flags_archs_versions(tmp_path, monkeypatch):
    pkg = _copy_pkg(tmp_path)
    archs = ["sm_80"]
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
    # the family's launcher interface header and a new .cu file too
    csrc = pkg / "families" / "attention" / "csrc"
    (csrc / "attention.h").write_text((csrc / "attention.h").read_text() + "\n// x\n")
    edited = key()
    assert edited != base
    (csrc / "new_kernel.cu").write_text("// new\n")
    assert key() != edited
    (csrc / "new_kernel.cu").unlink()
    assert key() == edited
    # another family's sources do not (editing one family rebuilds only that family) ...
    other = lambda: tkb.cache_key(archs, cflags, cuda_flags, pkg_dir=pkg, family="other")
    other_base = other()
    assert other_base != edited
    (pkg / "families" / "other" / "csrc" / "other.cu").write_text("// another family, edited\n")
    assert key() == edited and other() != other_base
    # ... while a DSL header is part of every family's key
    hdr.write_text("// a nested header, edited again\n")
    assert key() != edited
    hdr.write_text("// a nested header\n")
    # documentation does not
    (pkg / "include" / "NOTES.md").write_text("edited docs\n")
    assert key() == edited
    # flags, archs, torch and CUDA versions do
    assert key(archs=["sm_90a"]) != edited
    assert key(cuda_flags=cuda_flags + ["-DFOO"]) != edited
    assert key(cflags=cflags + ["-g"]) != edited
    assert key(torch_version="0.0.1") != edited
    assert key(cuda_version="99.9") != edited
    # no hidden knobs: the environment adds no nvcc flags
    monkeypatch.setenv("TK_EXTRA_NVCC_FLAGS", "-DTK_TEST_KNOB=1")
    assert "-DTK_TEST_KNOB=1" not in tkb.compile_flags(archs, verbose_ptxas=False)[1]
    # ptxas verbosity changes no code, so no rebuild
    assert key(cuda_flags=tkb.compile_flags(archs, verbose_ptxas=True)[1]) == edited
    # the same sources in another checkout build in a directory of their own (build.ninja holds absolute paths)
    twin = tmp_path / "twin"
    shutil.copytree(pkg, twin)
    assert tkb.cache_key(archs, cflags, cuda_flags, pkg_dir=twin) != edited


def test_sources_are_bindings_and_every_cu():
    assert "attention" in tkb.families()
    files = tkb.source_files("attention")
    assert files[0].name == "bindings.cpp"
    assert sorted(p.name for p in files[1:]) == sorted(p.name for p in ATTN_CSRC.glob("*.cu"))
    with pytest.raises(tkb.TKBuildError, match="no kernel family 'nope'"):
        tkb.source_files("nope")


# a torch / ATen / c10 / pybind11 header, or the families' torch glue (families/glue/check.h)
_TORCH_INCLUDE = re.compile(r'^\s*#\s*include\s*(?:[<"](?:torch|ATen|c10|pybind11)/|"(?:[\w./]*/)?check\.h")', re.M)


def test_only_bindings_include_torch():
    """In every family's csrc/ only bindings.cpp includes torch: the kernel files build without it."""
    families = tkb.families()
    assert {"attention", "classifier", "layernorm", "mlp"} <= set(families), families
    hits = []
    for fam in families:
        files = [p for p in (tkb.FAMILIES_DIR / fam / "csrc").rglob("*") if p.suffix in tkb.SOURCE_SUFFIXES]
        assert any(p.name == "bindings.cpp" for p in files), fam
        assert any(p.suffix == ".cu" for p in files), fam
        hits += [f"{p.relative_to(REPO_ROOT)}: {m.group(0).strip()}" for p in files if p.name != "bindings.cpp"
                 for m in _TORCH_INCLUDE.finditer(p.read_text())]
    assert not hits, "torch headers outside bindings.cpp (kernel files must not need torch):\n" + "\n".join(hits)


def test_torch_include_check_can_fail():
    assert _TORCH_INCLUDE.search('#include <torch/extension.h>')
    assert _TORCH_INCLUDE.search('x\n  #include "ATen/ATen.h"')
    assert _TORCH_INCLUDE.search('#include "check.h"') and _TORCH_INCLUDE.search('#include "../../glue/check.h"')
    assert not _TORCH_INCLUDE.search('#include "configs.cuh"')
    assert not _TORCH_INCLUDE.search('#include <cuda_bf16.h>')


# -----------------------------------------------------------------------------
# inline PTX lives in the DSL headers (tk_kernels/include/) only

_INLINE_ASM = re.compile(r"\b(?:asm|__asm__)\b(?:\s+(?:volatile|__volatile__))?\s*\(")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


def test_no_inline_ptx_outside_include():
    """No kernel source under tk_kernels/ outside include/ has inline PTX (asm / asm volatile): kernel files
    use the DSL's wrappers, so every PTX instruction is in one place."""
    files = sorted(p for p in (REPO_ROOT / "tk_kernels").rglob("*")
                   if p.suffix in tkb.SOURCE_SUFFIXES and tkb.INCLUDE_DIR not in p.parents)
    assert any(p.suffix == ".cu" for p in files) and not any(tkb.INCLUDE_DIR in p.parents for p in files)
    hits = []
    for p in files:
        code = _COMMENT.sub(lambda m: "\n" * m.group(0).count("\n"), p.read_text())  # keep the line numbers
        hits += [f"{p.relative_to(REPO_ROOT)}:{code[:m.start()].count(chr(10)) + 1}: {m.group(0)}"
                 for m in _INLINE_ASM.finditer(code)]
    assert not hits, ("inline PTX outside tk_kernels/include/ (move it into a DSL header, e.g. "
                      "include/thread/ or include/warp/, and call the wrapper):\n" + "\n".join(hits))


def test_inline_ptx_check_can_fail():
    assert _INLINE_ASM.search('  asm volatile("bar.sync 0;");')
    assert _INLINE_ASM.search('asm("mov.u32 %0, %%laneid;" : "=r"(x));')
    assert _INLINE_ASM.search('__asm__ __volatile__ ("trap;");')
    assert not _INLINE_ASM.search("int plasma(int x);") and not _INLINE_ASM.search("// asm-free")
    assert _INLINE_ASM.search("asm (") and not _INLINE_ASM.search(_COMMENT.sub("", '// asm("x")\n/* asm("y") */'))
    # the DSL headers do have some: the scan above would see them if it looked there
    assert any(_INLINE_ASM.search(p.read_text()) for p in tkb.INCLUDE_DIR.rglob("*.cuh"))


# -----------------------------------------------------------------------------
# shipped kernels are the measured winners: no compile-time tuning macros

_TUNING_MACRO = re.compile(r"^\s*#\s*(?:if|ifdef|ifndef|elif)\b.*\bTK_\w*", re.M)


def shipped_sources() -> list[Path]:
    """Kernel sources of every family and the DSL headers (dev/ experiments are not shipped)."""
    files = [p for p in tkb.INCLUDE_DIR.rglob("*") if p.suffix in tkb.SOURCE_SUFFIXES]
    for fam in tkb.families():
        files += [p for p in (tkb.FAMILIES_DIR / fam / "csrc").rglob("*") if p.suffix in tkb.SOURCE_SUFFIXES]
    return sorted(files)


def test_no_tk_tuning_macros_in_shipped_sources():
    files = shipped_sources()
    assert any(p.name == "tk.cuh" for p in files) and any(p.suffix == ".cu" for p in files)
    hits = [f"{p.relative_to(REPO_ROOT)}:{p.read_text()[:m.start()].count(chr(10)) + 1}: {m.group(0).strip()}"
            for p in files for m in _TUNING_MACRO.finditer(p.read_text())]
    assert not hits, "compile-time TK_* switches in shipped sources:\n" + "\n".join(hits)


def test_tuning_macro_check_can_fail():
    assert _TUNING_MACRO.search("x\n  #ifndef TK_BWD_DQ_BULK\n")
    assert _TUNING_MACRO.search("# if TK_SWIZZLE_LANE_XOR == 2 && defined(__CUDA_ARCH__)")
    assert _TUNING_MACRO.search("#ifdef TK_X")
    assert not _TUNING_MACRO.search("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900")
    assert not _TUNING_MACRO.search('  if (const char *env = std::getenv("TK_SMEM_LIMIT")) {')


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
    csrc = pkg / "families" / "tiny" / "csrc"
    csrc.mkdir(parents=True)
    (pkg / "include").mkdir()
    (csrc / "bindings.cpp").write_text(bindings)
    (pkg / "include" / "tiny.h").write_text(TINY_HEADER)
    (csrc / "tiny.cu").write_text(TINY_CU)
    return pkg


def test_tiny_build_loads_and_is_cached(tmp_path, monkeypatch, capsys):
    _need_nvcc()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    pkg = _tiny_pkg(tmp_path)
    module, lib = tkb.build("tiny", ["sm_80", "sm_90a"], pkg_dir=pkg)
    assert module.answer() == 42 and module.tk_archs == ("sm_80", "sm_90a")
    assert lib.is_file() and lib.parent.parent == tmp_path / "ext"
    assert lib.name.startswith("tk_tiny_")
    err = capsys.readouterr().err
    assert "this takes a few minutes" in err and "No CUDA runtime is found" not in err
    assert re.search(r"tk_kernels: tiny: built in [\d.]+ s \(waited [\d.]+ s for the build lock\)", err), err
    mtime = lib.stat().st_mtime_ns
    module2, lib2 = tkb.build("tiny", ["sm_90a", "sm_80"], pkg_dir=pkg)  # same key: no rebuild
    assert lib2 == lib and lib.stat().st_mtime_ns == mtime
    err = capsys.readouterr().err
    assert "this takes a few minutes" not in err and f"cached: {lib.parent}" in err
    # a header edit gives a new build directory
    (pkg / "include" / "tiny.h").write_text(TINY_HEADER + "// edited\n")
    _, lib3 = tkb.build("tiny", ["sm_80", "sm_90a"], pkg_dir=pkg, quiet=True)
    assert lib3 != lib and lib3.is_file()


def test_tiny_build_failure_raises_one_clear_error(tmp_path, monkeypatch):
    _need_nvcc()
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    pkg = _tiny_pkg(tmp_path, bindings="// empty: only the broken kernel file compiles\n")
    (pkg / "families" / "tiny" / "csrc" / "tiny.cu").write_text(TINY_CU + "\nthis_is_not_cuda_code;\n")
    with pytest.raises(tkb.TKBuildError) as info:
        tkb.build("tiny", ["sm_80"], pkg_dir=pkg, quiet=True)
    msg = str(info.value)
    assert "tk_kernels build failed" in msg and "this_is_not_cuda_code" in msg
    log = Path(msg.split("Full compiler log: ")[1].splitlines()[0])
    assert log.is_file() and "this_is_not_cuda_code" in log.read_text()
    assert isinstance(info.value, RuntimeError)
    # a retry in the same process compiles again (and fails the same way), it does not try to
    # import a library that was never built
    with pytest.raises(tkb.TKBuildError, match="this_is_not_cuda_code"):
        tkb.build("tiny", ["sm_80"], pkg_dir=pkg, quiet=True)


def test_tiny_build_concurrent_builders(tmp_path):
    """Several processes (like torchrun ranks) building the same extension at once all succeed, and
    only one of them builds: the other waits for the build lock and loads the result (its line names its
    rank and the wait). They import torch.utils.cpp_extension first without CUDA_HOME set (as
    torch.compile does), so torch guesses CUDA_HOME from PATH on its own; the build must still use the
    resolved one."""
    _need_nvcc()
    pkg = _tiny_pkg(tmp_path)
    code = ("import sys, torch.utils.cpp_extension; from tk_kernels import build as b; "
            f"m, lib = b.build('tiny', ['sm_80'], pkg_dir={str(pkg)!r}); "
            "assert m.answer() == 42; print(lib)")
    env = _env(tmp_path)
    if os.path.isfile("/usr/local/cuda/bin/nvcc") or shutil.which("nvcc"):  # found without env vars
        env.pop("CUDA_HOME", None)
        env.pop("CUDA_PATH", None)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=dict(env, RANK=str(rank)), cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
    assert len({out.strip().splitlines()[-1] for out, _ in outs}) == 1
    errs = "".join(err for _, err in outs)
    built = re.findall(r"tk_kernels: tiny: built in [\d.]+ s \(rank (\d), waited [\d.]+ s for the build lock\)", errs)
    cached = re.findall(r"tk_kernels: tiny: cached: \S+ \(rank (\d), waited ([\d.]+) s for the build lock\)", errs)
    assert errs.count("this takes a few minutes") == 1 and len(built) == 1 and len(cached) == 1, errs
    assert {built[0], cached[0][0]} == {"0", "1"}


def test_cli_rejects_bad_arch(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tk_kernels.build", "--arch", "sm_70"], env=_env(tmp_path),
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "sm_80" in r.stderr


def test_cli_rejects_unknown_family(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tk_kernels.build", "--family", "nope"], env=_env(tmp_path),
                       cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "unknown kernel family 'nope'" in r.stderr and "attention" in r.stderr


def test_load_extension_unknown_family_is_one_clear_error():
    with pytest.raises(tkb.TKBuildError, match="no kernel family 'nope'"):
        tkb.load_extension("nope")


# -----------------------------------------------------------------------------
# the real build (minutes): must fail, not skip, if the kernels do not compile

def test_cli_builds_real_kernels_for_sm80_and_sm90a(tmp_path):
    _need_nvcc()
    assert list(ATTN_CSRC.glob("*.cu")), "no kernel sources (tk_kernels/families/attention/csrc/*.cu) to build"
    cmd = [sys.executable, "-m", "tk_kernels.build", "--arch", "sm_80", "--arch", "sm_90a"]
    r = subprocess.run(cmd, env=_env(tmp_path), cwd=REPO_ROOT, capture_output=True, text=True, timeout=3600)
    assert r.returncode == 0, f"build failed:\n{r.stderr[-6000:]}"
    libs = [Path(l) for l in r.stdout.strip().splitlines()]
    assert len(libs) == len(tkb.families()), r.stdout
    lib = next(l for l in libs if l.name.startswith("tk_attention_"))
    assert lib.is_file(), r.stdout
    assert str(lib).startswith(str(tmp_path / "ext"))
    assert "this takes a few minutes" in r.stderr
    assert "No CUDA runtime is found" not in r.stderr  # torch's warning, expected on a machine without a GPU
    assert re.search(r"CUDA toolkit \S+ \(nvcc [\d.]+\)", r.stderr), r.stderr
    # a second run of the same build is cached and says so
    r2 = subprocess.run(cmd + ["--family", "attention"], env=_env(tmp_path), cwd=REPO_ROOT,
                        capture_output=True, text=True, timeout=600)
    assert r2.returncode == 0 and f"cached: {lib.parent}" in r2.stderr, r2.stderr
    assert Path(r2.stdout.strip().splitlines()[-1]) == lib
    # the attention ops' shared-memory gate (ops.MIN_SMEM_BYTES) is the number the kernels compute (no GPU
    # needed to ask)
    spec = importlib.util.spec_from_file_location(lib.stem, lib)
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)  # loads without a GPU (torch's CUDA build brings the runtime)
    from tk_kernels.families.attention import ops as tka
    assert ext.min_smem_bytes() == tka.MIN_SMEM_BYTES
    assert ext.min_smem_bytes() == 99456  # the D = 64 backward with 64-query blocks (configs.cu)
    _check_sass(libs)


# -----------------------------------------------------------------------------
# the SASS of the real build (issues 8 and 11: checkable on a CPU machine)

_SASS_OP = re.compile(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*)")


def sass_opcodes(lib: Path, arch: str, tool: str) -> dict[str, dict[str, int]]:
    """{kernel (mangled name): {opcode: count}} of lib's `arch` cubins."""
    r = subprocess.run([tool, "-sass", "-arch", arch, str(lib)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"cuobjdump -sass -arch {arch} {lib.name} failed: {r.stderr[-2000:]}"
    kernels: dict[str, dict[str, int]] = {}
    ops = None
    for line in r.stdout.splitlines():
        if "Function : " in line:
            ops = kernels.setdefault(line.split("Function : ", 1)[1].strip(), {})
            continue
        m = _SASS_OP.match(line)
        if m and ops is not None:
            ops[m.group(1)] = ops.get(m.group(1), 0) + 1
    return kernels


def _check_sass(libs: list[Path]):
    """No kernel of any family touches local memory (LDL / STL: spills or stack arrays) on either architecture, and
    on sm_90a the Hopper kernels -- the attention forward / backward and the MLP family's GEMM -- run on warpgroup
    MMA (HGMMA) fed by TMA (UTMALDG)."""
    tool = tkb.find_cuobjdump()
    if tool is None:
        pytest.skip("no cuobjdump (CUDA toolkit or triton) to read the SASS with")
    local, hopper = [], []
    for lib in libs:
        for arch in ("sm_80", "sm_90a"):
            kernels = sass_opcodes(lib, arch, tool)
            assert kernels, f"no {arch} kernels in {lib.name}"
            for name, ops in kernels.items():
                if ops.get("LDL", 0) or ops.get("STL", 0):
                    local.append(f"{arch} {name}: LDL {ops.get('LDL', 0)}, STL {ops.get('STL', 0)}")
                if arch == "sm_90a" and ("hopper_kernel" in name or ("tk_mlp" in name and "gemm_kernel" in name)):
                    hopper.append((name, ops))
    assert not local, "kernels with local-memory traffic:\n" + "\n".join(local)
    # attention: forward and backward, 2 dtypes x D 64 / 128 x causal or not, and dropout; MLP: 2 dtypes x 7 GEMMs
    # (5 layout / epilogue pairs, the dx and GELU' ones also with A's column sums)
    assert sum("attention_fwd_hopper" in n for n, _ in hopper) >= 8, [n for n, _ in hopper]
    assert sum("attention_bwd_hopper" in n for n, _ in hopper) >= 8, [n for n, _ in hopper]
    assert sum("gemm_kernel" in n for n, _ in hopper) == 14, [n for n, _ in hopper]
    missing = [n for n, ops in hopper if not ops.get("HGMMA") or not ops.get("UTMALDG")]
    assert not missing, "Hopper kernels without HGMMA or UTMALDG:\n" + "\n".join(missing)
