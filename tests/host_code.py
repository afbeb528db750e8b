"""compile_host_program(tmp_path, name, source, family): a C++ test program that includes kernel headers
(tk_kernels/include and the family's csrc/), compiled by nvcc as host code (device code for sm_80 alongside)
into tmp_path / name; the test skips where no CUDA toolkit is found. For the CPU tests that run the kernels'
own index and random-number functions against their Python twins (tests/conftest.py puts this directory
on sys.path)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tk_kernels.build import INCLUDE_DIR, family_csrc, find_cuda_home


def compile_host_program(tmp_path: Path, name: str, source: str, family: str) -> Path:
    cuda_home = find_cuda_home()
    nvcc = os.path.join(cuda_home, "bin", "nvcc") if cuda_home else shutil.which("nvcc")
    if not nvcc or not os.path.isfile(nvcc):
        pytest.skip("needs nvcc (the CUDA toolkit) to compile kernel headers as host code")
    src, exe = tmp_path / f"{name}.cu", tmp_path / name
    src.write_text(source)
    subprocess.run([nvcc, "-std=c++20", "-arch=sm_80", f"-I{INCLUDE_DIR}", f"-I{family_csrc(family)}", str(src),
                    "-o", str(exe)], check=True, capture_output=True, text=True)
    return exe
