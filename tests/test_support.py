"""CPU tests of the families' once-per-device support checks (tk_kernels/support.py's device_reason,
used by every family's environment_reason and attention's hopper_reason): GPUs and extensions faked
(torch.cuda's device queries and tk_kernels.build.load_extension monkeypatched), so that the checks that
only run on a GPU machine run here, with the exact messages the families gave before device_reason."""

import importlib
import types

import pytest
import torch

from tk_kernels import build as tkb
from tk_kernels import support


class FakeGPUs:
    """torch.cuda's device queries answered from {index: (capability, name, smem_optin)}, counted."""

    def __init__(self, monkeypatch, gpus: dict, current: int = 0):
        self.gpus, self.queries = gpus, []
        monkeypatch.setattr(torch.cuda, "current_device", lambda: current)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index: self.ask("capability", index)[0])
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: self.ask("name", index)[1])
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: types.SimpleNamespace(
            shared_memory_per_block_optin=self.ask("properties", device)[2]))

    def ask(self, what, device):
        index = device if isinstance(device, int) else device.index
        index = torch.cuda.current_device() if index is None else index
        self.queries.append((what, index))
        return self.gpus[index]


def test_device_reason_once_per_device_capability_before_build(monkeypatch):
    gpus = FakeGPUs(monkeypatch, {0: ((9, 0), "GPU zero", None), 1: ((7, 5), "GPU one", None)}, current=0)
    calls = []

    def gpu_reason(major, minor, name):
        calls.append(("gpu", major, minor, name))
        return f"too old: {name}" if (major, minor) < (8, 0) else None

    def build_reason(major, minor):
        calls.append(("build", major, minor))
        return None

    cache = {}
    assert support.device_reason(cache, torch.device("cuda", 0), gpu_reason, build_reason) is None
    assert calls == [("gpu", 9, 0, "GPU zero"), ("build", 9, 0)]
    # the GPU's own reason wins: the build is not judged (no build on a GPU that cannot run it)
    assert support.device_reason(cache, torch.device("cuda", 1), gpu_reason, build_reason) == "too old: GPU one"
    assert calls[2:] == [("gpu", 7, 5, "GPU one")]
    assert cache == {0: None, 1: "too old: GPU one"}
    # once per device: later calls, also through an index-less device (the current one, 0), ask nothing
    n_queries = len(gpus.queries)
    for device in (torch.device("cuda", 0), torch.device("cuda"), torch.device("cuda", 1)):
        support.device_reason(cache, device, gpu_reason, build_reason)
    assert len(calls) == 3 and len(gpus.queries) == n_queries
    assert support.device_reason(cache, torch.device("cuda"), gpu_reason, build_reason) is None
    # the build's reason is cached as well; a build check that raises caches nothing
    cache = {}
    reasons = iter(["the build failed", None])
    assert support.device_reason(cache, torch.device("cuda", 0), lambda *a: None,
                                 lambda major, minor: next(reasons)) == "the build failed"
    assert support.device_reason(cache, torch.device("cuda", 0), lambda *a: None,
                                 lambda major, minor: next(reasons)) == "the build failed"

    def boom(major, minor):
        raise tkb.TKBuildError("no compiler")
    cache = {}
    with pytest.raises(tkb.TKBuildError, match="no compiler"):
        support.device_reason(cache, torch.device("cuda", 0), lambda *a: None, boom)
    assert cache == {}


def _family(name):
    return importlib.import_module(f"tk_kernels.families.{name}.ops")


# The messages as the families wrote them before device_reason existed (a GPU "Fake GPU"; an extension
# built for `archs`): (family, check, capability, smem_optin, archs, message or None).
FAMILY_CASES = [
    ("mlp", "environment_reason", (8, 0), None, ("sm_80", "sm_90a"),
     "tk mlp runs on Hopper GPUs (compute capability 9.0: H100, H200) only, got Fake GPU with 8.0"),
    ("mlp", "environment_reason", (10, 0), None, ("sm_80", "sm_90a"),
     "tk mlp runs on Hopper GPUs (compute capability 9.0: H100, H200) only, got Fake GPU with 10.0"),
    ("mlp", "environment_reason", (9, 0), None, ("sm_80",),
     "tk mlp: the extension was built for sm_80, which cannot run on this compute capability 9.0 GPU "
     "(unset TK_ARCH or include its architecture)"),
    ("mlp", "environment_reason", (9, 0), None, ("sm_80", "sm_90"),
     "the mlp extension was built for sm_80, sm_90, without sm_90a (the tk mlp GEMM needs it: unset TK_ARCH "
     "or include sm_90a)"),
    ("mlp", "environment_reason", (9, 0), None, ("sm_80", "sm_90a"), None),
    ("classifier", "environment_reason", (7, 5), None, ("sm_80", "sm_90a"),
     "tk classifier needs a GPU of compute capability >= 8.0 (A100, H100, H200, ...), got Fake GPU with 7.5"),
    ("classifier", "environment_reason", (8, 6), None, ("sm_90a",),
     "tk classifier: the extension was built for sm_90a, which cannot run on this compute capability 8.6 GPU "
     "(unset TK_ARCH or include its architecture)"),
    ("classifier", "environment_reason", (8, 6), None, ("sm_80",), None),
    ("layernorm", "environment_reason", (7, 0), None, ("sm_80", "sm_90a"),
     "tk layer_norm needs a GPU of compute capability >= 8.0, got Fake GPU with 7.0"),
    ("layernorm", "environment_reason", (12, 0), None, ("sm_80", "sm_90a"),
     "tk layer_norm: the extension was built for sm_80, sm_90a, which cannot run on this compute capability "
     "12.0 GPU (unset TK_ARCH or include its architecture)"),
    ("layernorm", "environment_reason", (9, 0), None, ("sm_80", "sm_90a"), None),
    ("attention", "environment_reason", (7, 5), 65_536, ("sm_80", "sm_90a"),
     "tk attention needs a GPU of compute capability >= 8.0 (A100, H100, H200, ...), got Fake GPU with 7.5"),
    ("attention", "environment_reason", (8, 7), 49_152, ("sm_80", "sm_90a"),
     "tk attention needs 99456 bytes (97.1 KB) of shared memory per block; Fake GPU offers 49152 bytes (GPUs "
     "of compute capability 8.0, 8.6, 8.9, 9.0 such as A100, RTX 3090, RTX 4090, H100 have enough)"),
    ("attention", "environment_reason", (8, 6), 101_376, ("sm_90a",),
     "tk attention: the extension was built for sm_90a, which cannot run on this compute capability 8.6 GPU "
     "(unset TK_ARCH or include its architecture)"),
    ("attention", "environment_reason", (9, 0), 232_448, ("sm_80", "sm_90a"), None),
    ("attention", "hopper_reason", (8, 9), None, ("sm_80", "sm_90a"),
     "the Hopper attention forward needs an sm_90 GPU (H100, H200); Fake GPU is compute capability 8.9"),
    ("attention", "hopper_reason", (9, 0), None, ("sm_80", "sm_90"),
     "the attention extension was built for sm_80, sm_90, without sm_90a (the Hopper forward needs it: unset "
     "TK_ARCH or include sm_90a)"),
    ("attention", "hopper_reason", (9, 0), None, ("sm_80", "sm_90a"), None),
]


@pytest.mark.parametrize("family,check,capability,smem,archs,expect", FAMILY_CASES, ids=[
    f"{c[0]}-{c[1]}-{c[2][0]}.{c[2][1]}-{'+'.join(c[4])}" for c in FAMILY_CASES])
def test_family_device_checks_messages_and_cache(monkeypatch, family, check, capability, smem, archs, expect):
    ops = _family(family)
    cache_name = "_hopper_reasons" if check == "hopper_reason" else "_env_reasons"
    monkeypatch.setattr(ops, cache_name, {})
    monkeypatch.delitem(support._extensions, family, raising=False)  # the per-process handle on its extension
    loads = []
    monkeypatch.setattr(tkb, "load_extension", lambda f, verbose=False: loads.append(f) or
                        types.SimpleNamespace(tk_archs=archs))
    gpus = FakeGPUs(monkeypatch, {0: (capability, "Fake GPU", smem), 3: (capability, "Fake GPU", smem)},
                    current=3)
    reason = getattr(ops, check)(torch.device("cuda", 0))
    assert reason == expect
    assert set(loads) <= {family}
    if reason is not None and "extension" not in reason:
        assert loads == []  # a GPU the kernels cannot use: the extension is not built
    # once per device: the second call asks the GPU nothing and loads nothing; another device is asked anew
    n_queries, n_loads = len(gpus.queries), len(loads)
    assert getattr(ops, check)(torch.device("cuda", 0)) == expect
    assert (len(gpus.queries), len(loads)) == (n_queries, n_loads)
    assert getattr(ops, cache_name) == {0: expect}
    assert getattr(ops, check)(torch.device("cuda")) == expect  # the current device: 3
    assert {index for _, index in gpus.queries[n_queries:]} == {3}
    assert getattr(ops, cache_name) == {0: expect, 3: expect}


@pytest.mark.parametrize("family", ["attention", "classifier", "layernorm", "mlp"])
def test_family_extension_is_loaded_once_per_process(monkeypatch, family):
    """Every op call asks its family's _ext(): after the first, no call reaches the build's locked
    load_extension (the MLP's _ext once went through it on every GEMM)."""
    ops = _family(family)
    monkeypatch.delitem(support._extensions, family, raising=False)
    loads = []
    fake = types.SimpleNamespace(tk_archs=("sm_80",))
    monkeypatch.setattr(tkb, "load_extension", lambda f, verbose=False: loads.append(f) or fake)
    assert all(ops._ext() is fake for _ in range(3))
    assert loads == [family]
