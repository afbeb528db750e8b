"""
torch.compile support that not every PyTorch version gives our custom ops by itself.

Inductor has no lowering for our ops (tk::*), so at an op's first call in a graph it creates an "implicit
fallback" (a call of the op's own kernel). Before doing so, torch 2.11's inductor formats that call's
arguments for a log line, enabled or not, and an argument's text holds its whole chain of producers. With
kernels=tk the classifier's first call comes after the last block, and its input's text doubles per
LayerNorm: GPT-2 124M's compile never finished (seen on the H200 with torch 2.11, stuck in that formatting;
the 6-layer shakespeare_char model compiled). torch 2.14 formats the message lazily.

register_inductor_fallbacks() creates those fallbacks up front, exactly as inductor would (with the layout
constraint of the op's tag), so the message is never made. The ops' fake functions call it: they run while
torch.compile traces a graph, before inductor lowers it, and never in plain eager mode.
"""

from __future__ import annotations

import torch

_registered: set[str] = set()
_done = False  # every tk:: op had been registered at the last call (the op list is long to scan)


def register_inductor_fallbacks() -> None:
    """Give inductor a fallback lowering for every tk:: op defined so far (once per op; a no-op where
    inductor or its helpers are missing). Called from every fake function: after the first call it
    costs one flag test."""
    global _done
    if _done:
        return
    _done = True  # the package defines all its ops at import, before any fake function can run
    names = [n for n in torch._C._dispatch_get_all_op_names() if n.startswith("tk::") and n not in _registered]
    if not names:
        return
    try:
        from torch._inductor.lowering import lowerings, make_fallback
        try:
            from torch._inductor.lowering import tag_to_layout_constraint
            from torch._library.utils import get_layout_constraint_tag
        except ImportError:  # older torch: no layout tags; inductor's default then is no constraint
            tag_to_layout_constraint = get_layout_constraint_tag = None
    except ImportError:
        return
    for name in names:
        _registered.add(name)
        packet = getattr(torch.ops.tk, name.split("::", 1)[1], None)
        if packet is None:
            continue
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if op in lowerings:
                continue
            constraint = None
            if get_layout_constraint_tag is not None:
                constraint = tag_to_layout_constraint(get_layout_constraint_tag(op, with_default=True))
            make_fallback(op, layout_constraint=constraint, warn=False)
