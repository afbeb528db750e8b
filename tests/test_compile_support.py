"""tk_kernels/compile_support.py: every tk:: custom op gets its inductor fallback before inductor lowers a
graph (torch 2.11's implicit-fallback log message was exponential in the depth of a chain of our ops)."""
import pytest
import torch

import tk_kernels  # noqa: F401  (registers the tk:: ops)
from tk_kernels import compile_support

lowering = pytest.importorskip("torch._inductor.lowering")


def tk_ops():
    names = [n.split("::", 1)[1] for n in torch._C._dispatch_get_all_op_names() if n.startswith("tk::")]
    return [getattr(getattr(torch.ops.tk, n), o) for n in names for o in getattr(torch.ops.tk, n).overloads()]


def test_every_tk_op_gets_a_fallback_lowering():
    ops = tk_ops()
    assert len(ops) >= 9, ops  # attention fwd/bwd, layer norm fwd/bwd, classifier, mlp fwd/bwd, linear fwd/bwd
    compile_support.register_inductor_fallbacks()
    compile_support.register_inductor_fallbacks()  # a second call is a no-op
    missing = [op for op in ops if op not in lowering.lowerings]
    assert not missing, missing


def test_fake_functions_register_them():
    """The fake (meta) functions run while torch.compile traces: they are where the registration happens."""
    compile_support._registered.clear()
    compile_support._done = False
    for op in tk_ops():
        lowering.lowerings.pop(op, None)
    q = torch.empty(1, 2, 8, 64, device="meta", dtype=torch.bfloat16)
    torch.ops.tk.attention_fwd(q, q, q, True, 0.125, 0.0)  # meta tensors: runs the fake function
    assert all(op in lowering.lowerings for op in tk_ops())
