"""
On-demand build of the tk_kernels CUDA extensions, one per kernel family (ninja via torch.utils.cpp_extension).

    python -m tk_kernels.build                      # every family, for the GPU(s) of this machine
    python -m tk_kernels.build --family attention   # one family
    python -m tk_kernels.build --arch sm_80 --arch sm_90a --verbose   # ahead of time, no GPU needed

A family is a folder tk_kernels/families/<name>/ whose csrc/ holds bindings.cpp (the only file with
torch headers) and its *.cu kernel files; all of them share the tile DSL in tk_kernels/include/.
From Python, `load_extension("attention")` returns that family's compiled module (built once, then
cached on disk and per process). The on-disk cache key of a family is a hash of every source and
header under its csrc/ and under include/, the compiler flags, the target architectures, and the
torch / CUDA / Python versions, so editing one family rebuilds only that family, in a fresh build
directory `tk_<family>_<hash>` under $TORCH_EXTENSIONS_DIR (or torch's default).

Environment:
    CUDA_HOME / CUDA_PATH   CUDA toolkit (else /usr/local/cuda, else found from `nvcc` on PATH)
    TK_ARCH                 target architectures, e.g. "sm_80,sm_90a" (default: the visible GPUs)
    MAX_JOBS                parallel compile jobs (default: all CPU cores)
    TK_VERBOSE_PTXAS=1      print ptxas register/shared-memory usage of every kernel
    TORCH_EXTENSIONS_DIR    where builds are cached
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import logging
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

PKG_DIR = Path(__file__).resolve().parent
INCLUDE_DIR = PKG_DIR / "include"
FAMILIES_DIR = PKG_DIR / "families"
BUILD_VERSION = 2  # bump to force a rebuild when this file's logic changes
SOURCE_SUFFIXES = (".h", ".hpp", ".cuh", ".cu", ".cpp", ".cc", ".inl", ".inc")
DEFAULT_AOT_ARCHS = ["sm_80", "sm_90a"]  # used when no GPU is visible and no arch was asked for


class TKBuildError(RuntimeError):
    """The tk_kernels extension could not be built (or loaded)."""


# -----------------------------------------------------------------------------
# CUDA toolkit

def find_cuda_home() -> str | None:
    """CUDA_HOME / CUDA_PATH, else /usr/local/cuda if it has nvcc, else realpath(nvcc)/../.."""
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            return os.environ[var]
    if os.path.isfile("/usr/local/cuda/bin/nvcc"):
        return "/usr/local/cuda"
    nvcc = shutil.which("nvcc")
    if nvcc:
        return str(Path(os.path.realpath(nvcc)).parent.parent)
    return None


def find_cuobjdump() -> str | None:
    """cuobjdump (reads a built library's SASS): $CUOBJDUMP, PATH, the CUDA toolkit's, else the copy triton ships
    (PyTorch's CUDA wheels bring triton)."""
    cands = [os.environ.get("CUOBJDUMP", ""), shutil.which("cuobjdump") or ""]
    cuda_home = find_cuda_home()
    if cuda_home:
        cands.append(os.path.join(cuda_home, "bin", "cuobjdump"))
    spec = importlib.util.find_spec("triton")
    if spec is not None and spec.origin:
        cands.append(os.path.join(os.path.dirname(spec.origin), "backends", "nvidia", "bin", "cuobjdump"))
    return next((c for c in cands if c and os.path.isfile(c)), None)


def _cpp_extension():
    """Import torch.utils.cpp_extension with CUDA_HOME resolved first.

    cpp_extension computes CUDA_HOME once at import time from PATH, which can point at a wrapper
    script (/usr/local/bin/nvcc -> CUDA_HOME=/usr). So set the environment before the import and,
    in case something imported it earlier, also fix the module attribute its helpers read."""
    cuda_home = find_cuda_home()
    if cuda_home is None:
        raise TKBuildError("tk_kernels build: no CUDA toolkit found (nvcc). Set CUDA_HOME to the "
                           "CUDA install directory, e.g. CUDA_HOME=/usr/local/cuda.")
    if not os.path.isfile(os.path.join(cuda_home, "bin", "nvcc")):
        raise TKBuildError(f"tk_kernels build: CUDA_HOME={cuda_home} has no bin/nvcc.")
    os.environ["CUDA_HOME"] = cuda_home
    import torch
    if not torch.version.cuda:
        raise TKBuildError(f"tk_kernels build: torch {torch.__version__} is a CPU-only build; "
                           "a CUDA build of torch is needed to build the kernels.")
    # On a machine without a GPU, cpp_extension logs "No CUDA runtime is found, using CUDA_HOME=..." at
    # import; that is expected for ahead-of-time builds, and build() says which toolkit it uses instead.
    log = logging.getLogger("torch.utils.cpp_extension")
    no_runtime = _DropMessage("No CUDA runtime is found")
    log.addFilter(no_runtime)
    try:
        from torch.utils import cpp_extension
    finally:
        log.removeFilter(no_runtime)
    cpp_extension.CUDA_HOME = cuda_home
    return cpp_extension


class _DropMessage(logging.Filter):
    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


_nvcc_version_cache: dict[str, str] = {}

def nvcc_version(cuda_home: str) -> str:
    if cuda_home not in _nvcc_version_cache:
        try:
            out = subprocess.run([os.path.join(cuda_home, "bin", "nvcc"), "--version"],
                                 capture_output=True, text=True, check=True).stdout
            m = re.search(r"release ([\d.]+), V([\d.]+)", out)
            _nvcc_version_cache[cuda_home] = m.group(2) if m else out.strip().splitlines()[-1]
        except (OSError, subprocess.CalledProcessError) as e:
            raise TKBuildError(f"tk_kernels build: cannot run {cuda_home}/bin/nvcc --version: {e}") from e
    return _nvcc_version_cache[cuda_home]


# -----------------------------------------------------------------------------
# architectures

_ARCH_RE = re.compile(r"^(?:sm_|compute_)?(\d+?)\.?(\d)(a?)$")  # major digits, one minor digit

def parse_arch(arch: str) -> str:
    """'sm_90a' / 'compute_90a' / '90a' / '9.0a' -> 'sm_90a';  'sm_80' / '8.0' / '80' -> 'sm_80'."""
    m = _ARCH_RE.match(arch.strip().lower())
    if m is None:
        raise ValueError(f"bad CUDA architecture {arch!r}: expected e.g. sm_80, sm_86, sm_89, sm_90, sm_90a")
    major, minor, suffix = int(m.group(1)), int(m.group(2)), m.group(3)
    if major < 8:
        raise ValueError(f"CUDA architecture {arch!r} is not supported: tk_kernels needs sm_80 or newer")
    return f"sm_{major}{minor}{suffix}"


def parse_arch_list(text: str) -> list[str]:
    """'sm_80,sm_90a' or 'sm_80;sm_90a' or 'sm_80 sm_90a' -> ['sm_80', 'sm_90a'] (deduplicated, sorted)."""
    return sorted({parse_arch(a) for a in re.split(r"[,; ]+", text) if a.strip()})


def arch_for_capability(major: int, minor: int) -> str:
    # Hopper gets the arch-specific target (sm_90a) so kernels may use wgmma/TMA; others their own
    return "sm_90a" if (major, minor) == (9, 0) else f"sm_{major}{minor}"


def detect_archs() -> list[str]:
    """Architectures of the visible GPUs (empty if there are none)."""
    import torch
    if not torch.cuda.is_available():
        return []
    return sorted({arch_for_capability(*torch.cuda.get_device_capability(i))
                   for i in range(torch.cuda.device_count())})


def resolve_archs(archs: list[str] | None = None) -> list[str]:
    """Explicit archs, else $TK_ARCH, else the visible GPUs, else DEFAULT_AOT_ARCHS."""
    if archs:
        return sorted({parse_arch(a) for a in archs})
    if os.environ.get("TK_ARCH", "").strip():
        return parse_arch_list(os.environ["TK_ARCH"])
    return detect_archs() or list(DEFAULT_AOT_ARCHS)


def gencode_flags(archs: list[str]) -> list[str]:
    """['sm_80', 'sm_90a'] -> ['-gencode=arch=compute_80,code=sm_80', '-gencode=arch=compute_90a,code=sm_90a']"""
    return [f"-gencode=arch=compute_{a[3:]},code={a}" for a in archs]


# -----------------------------------------------------------------------------
# families, sources, flags, cache key

def families(pkg_dir: Path = PKG_DIR) -> list[str]:
    """Names of the kernel families: the folders families/<name>/ that have a csrc/."""
    root = pkg_dir / "families"
    return sorted(p.name for p in root.iterdir() if (p / "csrc").is_dir()) if root.is_dir() else []


def family_csrc(family: str, pkg_dir: Path = PKG_DIR) -> Path:
    csrc = pkg_dir / "families" / family / "csrc"
    if not csrc.is_dir():
        known = ", ".join(families(pkg_dir)) or "none"
        raise TKBuildError(f"tk_kernels build: no kernel family {family!r} ({csrc} does not exist; "
                           f"families: {known})")
    return csrc


def source_files(family: str = "attention", pkg_dir: Path = PKG_DIR) -> list[Path]:
    """What gets compiled for a family: its csrc/bindings.cpp and every csrc/*.cu."""
    csrc = family_csrc(family, pkg_dir)
    return [csrc / "bindings.cpp"] + sorted(csrc.glob("*.cu"))


def hashed_files(family: str = "attention", pkg_dir: Path = PKG_DIR) -> list[Path]:
    """Everything that can affect a family's build: all sources and headers under its csrc/, include/ and
    families/glue/ (the torch glue shared by the bindings)."""
    files = []
    for root in (family_csrc(family, pkg_dir), pkg_dir / "include", pkg_dir / "families" / "glue"):
        if root.is_dir():
            files += [p for p in root.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES]
    return sorted(files)


def compile_flags(archs: list[str], verbose_ptxas: bool | None = None) -> tuple[list[str], list[str]]:
    """(host C++ flags, nvcc flags). The -gencode flags make cpp_extension skip adding its own
    arch flags (_get_cuda_arch_flags returns [] when any user nvcc flag mentions 'arch')."""
    if verbose_ptxas is None:
        verbose_ptxas = os.environ.get("TK_VERBOSE_PTXAS", "0") == "1"
    cflags = ["-O3", "-std=c++20"]
    cuda_flags = [
        "-O3", "-std=c++20", "--use_fast_math", "-lineinfo", "--expt-relaxed-constexpr",
        # cpp_extension defines these to keep torch's half types unambiguous; the kernel files do
        # not include torch headers and want the ordinary cuda_fp16/cuda_bf16 operators.
        "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
        "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__",
    ]
    if len(archs) > 1:
        cuda_flags.append(f"--threads={len(archs)}")  # compile the per-arch variants in parallel
    if verbose_ptxas:
        cuda_flags.append("-Xptxas=-v")
    cuda_flags += gencode_flags(archs)
    return cflags, cuda_flags


def cache_key(archs: list[str], cflags: list[str], cuda_flags: list[str], pkg_dir: Path = PKG_DIR,
              torch_version: str | None = None, cuda_version: str | None = None, family: str = "attention") -> str:
    """Hex digest over the family's sources/headers (relative path + content), flags, archs, versions, and where
    the sources are: cpp_extension's build.ninja names them by absolute path, so two checkouts with the same
    sources sharing one build directory made each one's next load rebuild the whole family (seen in session 20:
    three trees on one GPU machine, every bench_train run recompiling for minutes)."""
    import torch
    h = hashlib.sha256()
    def add(x: str | bytes) -> None:
        b = x.encode() if isinstance(x, str) else x
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    add(f"build-v{BUILD_VERSION}")
    add("family:" + family)
    add("at:" + str(Path(pkg_dir).resolve()))
    for p in hashed_files(family, pkg_dir):
        add(p.relative_to(pkg_dir).as_posix())
        add(p.read_bytes())
    add("archs:" + ",".join(archs))
    add("cflags:" + " ".join(cflags))
    add("cuda_flags:" + " ".join(f for f in cuda_flags if f != "-Xptxas=-v"))  # -v changes no code
    add("torch:" + (torch_version or torch.__version__))
    add("cuda:" + (cuda_version or str(torch.version.cuda)))
    add(f"python:{sys.version_info.major}.{sys.version_info.minor}{getattr(sys, 'abiflags', '')}")
    return h.hexdigest()[:16]


def extensions_root(cpp_extension) -> Path:
    root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    return Path(root)


# -----------------------------------------------------------------------------
# build + load

def _library_path(build_dir: Path, name: str) -> Path:
    suffix = ".pyd" if sys.platform == "win32" else ".so"
    return build_dir / f"{name}{suffix}"


def _first_errors(log: str, n: int = 15) -> str:
    lines = [l for l in log.splitlines()
             if re.search(r"\berror\b|: fatal|undefined reference|undefined symbol", l)
             and not l.startswith("Error building extension")]
    return "\n".join(lines[:n])


class _DirLock:
    """Exclusive advisory lock (flock) on <build_dir>/tk_build.lock for the whole build+load.

    cpp_extension has its own lock per build directory; older torch versions implement it as a
    "baton" file whose mere existence blocks, so a build killed half-way (timeout, OOM) would make
    every later run wait forever. Our flock is released by the kernel when a process dies, and
    while we hold it no other tk_kernels build is inside cpp_extension, so a leftover baton file
    must be stale and is removed."""

    def __init__(self, build_dir: Path):
        self.path = build_dir / "tk_build.lock"
        self.fd: int | None = None

    def __enter__(self):
        import fcntl
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        import fcntl
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)
        self.fd = None


def _raise_build_error(name, archs, nvcc_ver, build_dir, lib, log_path, verbose):
    """Turn the exception being handled into one TKBuildError pointing at the compiler log."""
    e = sys.exc_info()[1]
    if isinstance(e, ImportError):  # compiled and linked, but the library does not load
        raise TKBuildError(f"tk_kernels: {lib} was built but does not load: {e}\n"
                           f"Build directory: {build_dir}") from None
    text = str(e)
    msg = f"tk_kernels build failed ({name}, archs {','.join(archs)}, nvcc {nvcc_ver}).\n"
    if verbose:  # ninja's output went to stdout, not into the exception
        msg += "Compiler output: printed above.\n"
    else:  # cpp_extension put the whole ninja/nvcc output into the message: keep it on disk
        log_path.write_text(text + "\n")
        msg += f"Full compiler log: {log_path}\n"
    msg += f"Build directory: {build_dir}\n"
    first = _first_errors(text)
    if first:
        msg += f"First errors:\n{first}\n"
    msg += "Last lines of the log:\n" + "\n".join(text.splitlines()[-40:])
    raise TKBuildError(msg) from None


def build(family: str = "attention", archs: list[str] | None = None, verbose: bool = False,
          quiet: bool = False, pkg_dir: Path | None = None):
    """Build (if needed) and import one family's extension. Returns (module, library path).
    pkg_dir: a directory with include/ and families/<family>/csrc/ (default: this package; tests use
    small ones). quiet: no progress lines on stderr."""
    pkg_dir = Path(pkg_dir) if pkg_dir is not None else PKG_DIR
    csrc = family_csrc(family, pkg_dir)
    cpp_extension = _cpp_extension()
    import torch
    archs = resolve_archs(archs)
    cflags, cuda_flags = compile_flags(archs)
    if "-Xptxas=-v" in cuda_flags:
        verbose = True  # ptxas reports are only visible when ninja's output is shown
    cuda_home = cpp_extension.CUDA_HOME
    nvcc_ver = nvcc_version(cuda_home)
    key = cache_key(archs, cflags, cuda_flags, cuda_version=f"{torch.version.cuda}/nvcc{nvcc_ver}",
                    pkg_dir=pkg_dir, family=family)
    name = f"tk_{family}_{key}"
    build_dir = extensions_root(cpp_extension) / name
    build_dir.mkdir(parents=True, exist_ok=True)
    sources = [str(p) for p in source_files(family, pkg_dir)]
    for s in sources:
        if not os.path.isfile(s):
            raise TKBuildError(f"tk_kernels build: missing source file {s}")
    lib = _library_path(build_dir, name)
    log_path = build_dir / "build.log"

    # under torchrun the lines name the rank: the first rank builds, the others wait for its lock and load
    rank = f"rank {os.environ['RANK']}, " if "RANK" in os.environ else ""
    t_lock = time.perf_counter()
    with _DirLock(build_dir):
        waited = time.perf_counter() - t_lock
        baton = build_dir / "lock"
        if baton.exists() and not hasattr(cpp_extension, "FileLock"):
            baton.unlink()  # stale baton of a killed build (see _DirLock)
        building = not lib.exists()
        if not quiet:
            if not building:
                print(f"tk_kernels: {family}: cached: {build_dir} ({rank}waited {waited:.1f} s for the build lock)",
                      file=sys.stderr, flush=True)
            else:
                jobs = os.environ.get("MAX_JOBS") or str(os.cpu_count() or 1)
                print(f"tk_kernels: {family}: building {name} for {','.join(archs)} with {len(sources)} sources, "
                      f"MAX_JOBS={jobs}, CUDA toolkit {cuda_home} (nvcc {nvcc_ver}) in {build_dir} "
                      "(this takes a few minutes)", file=sys.stderr, flush=True)
        t_build = time.perf_counter()
        os.environ.setdefault("MAX_JOBS", str(os.cpu_count() or 1))
        try:
            module = cpp_extension.load(
                name=name, sources=sources,
                extra_cflags=cflags, extra_cuda_cflags=cuda_flags,
                extra_include_paths=[str(pkg_dir / "include"), str(csrc), str(pkg_dir / "families" / "glue")],
                build_directory=str(build_dir), verbose=verbose, with_cuda=True,
            )
        except (ImportError, RuntimeError, subprocess.CalledProcessError, OSError):
            # forget this attempt: cpp_extension would otherwise skip the build on a retry in this
            # process and only try to import the missing library
            getattr(getattr(cpp_extension, "JIT_EXTENSION_VERSIONER", None), "entries", {}).pop(name, None)
            _raise_build_error(name, archs, nvcc_ver, build_dir, lib, log_path, verbose)
        if building and not quiet:
            print(f"tk_kernels: {family}: built in {time.perf_counter() - t_build:.1f} s ({rank}waited "
                  f"{waited:.1f} s for the build lock)", file=sys.stderr, flush=True)
    if not lib.exists():  # very old/new torch naming; fall back to what the module says
        lib = Path(getattr(module, "__file__", lib))
    module.tk_archs = tuple(archs)  # what this library was compiled for (see arch_runs_on)
    return module, lib


def arch_runs_on(arch: str, major: int, minor: int) -> bool:
    """Whether an sm_XY cubin runs on a GPU of compute capability major.minor: same major and
    XY <= the device's minor; arch-specific targets (sm_90a) only on exactly that capability."""
    m = _ARCH_RE.match(arch)
    a_major, a_minor, suffix = int(m.group(1)), int(m.group(2)), m.group(3)
    if suffix:
        return (a_major, a_minor) == (major, minor)
    return a_major == major and a_minor <= minor


_lock = threading.Lock()
_cached: dict[str, object] = {}  # family -> module, or the TKBuildError of its failed build

def load_extension(family: str = "attention", verbose: bool = False):
    """The compiled extension module of a kernel family, built on first use; cached per process
    (a failure too)."""
    with _lock:
        got = _cached.get(family)
        if isinstance(got, TKBuildError):
            raise got
        if got is not None:
            return got
        try:
            module, _ = build(family, verbose=verbose, quiet=False)
        except TKBuildError as e:
            _cached[family] = e
            raise
        _cached[family] = module
        return module


def load_reason(family: str, major: int, minor: int, label: str | None = None) -> str | None:
    """Why `family`'s extension cannot run on a GPU of compute capability major.minor (it does not
    build/load, or was built for other architectures), or None. Builds it if needed. `label` starts
    the message (default "tk <family>")."""
    label = label or f"tk {family}"
    try:
        ext = load_extension(family)
    except TKBuildError as e:
        return f"{label}: the tk_kernels CUDA extension does not build/load here: {e}"
    archs = getattr(ext, "tk_archs", ())
    if archs and not any(arch_runs_on(a, major, minor) for a in archs):
        return (f"{label}: the extension was built for {', '.join(archs)}, which cannot run on this "
                f"compute capability {major}.{minor} GPU (unset TK_ARCH or include its architecture)")
    return None


def arch_reason(ext, family: str, arch: str, what: str) -> str | None:
    """Why `family`'s loaded extension `ext` lacks the code for `arch` that `what` needs (built for other
    architectures), or None. The Hopper kernels need "sm_90a": sm_80 code runs on an H100 but has no wgmma."""
    archs = getattr(ext, "tk_archs", ())
    if arch in archs:
        return None
    return (f"the {family} extension was built for {', '.join(archs) or 'unknown archs'}, without {arch} "
            f"({what} needs it: unset TK_ARCH or include {arch})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tk_kernels.build", description=__doc__.split("\n\n")[0].strip())
    ap.add_argument("--family", action="append", default=None,
                    help="kernel family to build, repeatable (default: every folder under "
                         "tk_kernels/families/ with a csrc/: " + ", ".join(families()) + ")")
    ap.add_argument("--arch", action="append", default=None,
                    help="target architecture, repeatable: sm_80, sm_86, sm_89, sm_90, sm_90a "
                         "(default: $TK_ARCH, else the visible GPUs, else sm_80 + sm_90a)")
    ap.add_argument("--verbose", action="store_true", help="show the ninja/nvcc command lines and output")
    args = ap.parse_args(argv)
    try:
        archs = resolve_archs(args.arch)
    except ValueError as e:
        ap.error(str(e))
    names = args.family or families()
    unknown = [f for f in names if f not in families()]
    if unknown:
        ap.error(f"unknown kernel family {unknown[0]!r}; families: {', '.join(families()) or 'none'}")
    try:
        cuda_home = _cpp_extension().CUDA_HOME
        print(f"tk_kernels: CUDA toolkit {cuda_home} (nvcc {nvcc_version(cuda_home)}), archs {','.join(archs)}",
              file=sys.stderr, flush=True)
        if len(names) == 1:
            libs = [build(names[0], archs, verbose=args.verbose)[1]]
        else:
            return _build_in_parallel(names, archs, args.verbose)
    except TKBuildError as e:
        print(str(e), file=sys.stderr)
        return 1
    for lib in libs:
        print(lib)
    return 0


def _build_in_parallel(names: list[str], archs: list[str], verbose: bool) -> int:
    """Each family in its own `python -m tk_kernels.build --family F` process, all at once: a family's
    ninja compiles its own sources in parallel, but one after another the families' wall times add up
    (4 families on a 16-core H200 host: 191 s serially, bounded by the slowest family in parallel).
    Each child's output is printed in full, in family order, once all have finished."""
    cmd = [sys.executable, "-m", "tk_kernels.build"] + [f"--arch={a}" for a in archs]
    cmd += ["--verbose"] if verbose else []
    import tempfile
    logs = [tempfile.TemporaryFile(mode="w+") for _ in names]  # files, not pipes: no child waits on a reader
    procs = [subprocess.Popen(cmd + ["--family", f], stdout=log, stderr=subprocess.STDOUT, cwd=str(PKG_DIR.parent))
             for f, log in zip(names, logs)]
    for p in procs:
        p.wait()
    outs = []
    for log in logs:
        log.seek(0)
        outs.append(log.read())
        log.close()
    failed = []
    for f, p, out in zip(names, procs, outs):
        lines = out.splitlines()
        libs = [l for l in lines if l.endswith(".so") and os.path.isabs(l)]
        print("\n".join(l for l in lines if l not in libs), file=sys.stderr, flush=True)
        print("\n".join(libs), flush=True)
        if p.returncode != 0:
            failed.append(f)
    if failed:
        print(f"tk_kernels: build failed for {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
