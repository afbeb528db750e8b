"""A kernel family's sources copied into a package directory of their own, with text substitutions, for the
dev/ scripts that build and time variants side by side (tk_kernels.build.build(family, pkg_dir=...) builds it
into its own extension):

    pkg = variant_pkg("mlp", "store3", [("gemm.cu", old, new)], tmp)

The package holds what a family build reads: include/, families/glue/ (check.h, shared by the bindings) and
families/<family>/csrc/. Each substitution replaces every occurrence of `old` in csrc/<file> and must find it.
"""
import shutil
from pathlib import Path

TK = Path(__file__).resolve().parents[1] / "tk_kernels"


def variant_pkg(family: str, name: str, subs, tmp: Path) -> Path:
    pkg = Path(tmp) / name
    shutil.copytree(TK / "include", pkg / "include")
    shutil.copytree(TK / "families" / "glue", pkg / "families" / "glue")
    dst = pkg / "families" / family / "csrc"
    shutil.copytree(TK / "families" / family / "csrc", dst)
    for fname, old, new in subs:
        text = (dst / fname).read_text()
        assert old in text, f"variant {name}: {old!r} not in {fname} (the shipped source changed)"
        (dst / fname).write_text(text.replace(old, new))
    return pkg
