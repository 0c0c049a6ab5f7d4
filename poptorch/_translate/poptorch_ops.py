"""Rules for PopTorch's own ops (torch.ops.poptorch.*, poptorch/_custom_ops.py)."""
from __future__ import annotations

import popxl
import popxl.ops as ops
from popxl.ops.misc import print_tensor_op

from .context import Op, aten

_FLOAT_FORMATS = {0: "auto", 1: "fixed", 2: "scientific", 3: "none"}


@aten("poptorch::identity_loss")
def identity_loss(op: Op):
    x = op.t("x")
    reduction = int(op.arg("reduction"))
    if reduction == 0:
        return ops.sum(x) if x.rank else ops.identity(x)
    if reduction == 1:
        return ops.mean(x) if x.rank else ops.identity(x)
    return ops.identity(x)


@aten("poptorch::nop", "poptorch::recomputation_checkpoint", "poptorch::set_available_memory", "poptorch::set_matmul_serialization", "poptorch::set_overlap_for_input", "poptorch::set_overlap_for_output")
def annotation(op: Op):
    """An identity: what the annotation asks for was attached to the op that made its input
    (poptorch/_program.py, before the translation)."""
    return ops.identity(op.t("x"))


@aten("poptorch::ipu_print_tensor")
def ipu_print_tensor(op: Op):
    x = op.t("x")
    title = op.arg("title", "") or x.name
    # PopART's op, which prints PopTorch's multi-character separator (PopXL's API allows one character)
    return print_tensor_op(x, title=title, print_gradient=bool(op.arg("print_gradient", 1)),
                           summarise_threshold=int(op.arg("summarise_threshold")),
                           edge_items=int(op.arg("edge_items")), max_line_width=int(op.arg("max_line_width")),
                           digits=int(op.arg("digits")),
                           float_format=_FLOAT_FORMATS.get(int(op.arg("float_format")), "auto"),
                           separator=op.arg("separator"), open_bracket=op.arg("open_bracket"),
                           close_bracket=op.arg("close_bracket"))


def _start(op: Op) -> popxl.Tensor:
    s = op.t("start")
    s = ops.reshape(s, (1,)) if s.rank == 0 else ops.reshape(s, (s.nelms,)) if s.rank > 1 else s
    s = ops.slice(s, start=[0], stop=[1], axis=[0]) if s.shape[0] > 1 else s
    return s if s.dtype == popxl.uint32 else ops.cast(s, popxl.uint32)


@aten("poptorch::dynamic_slice")
def dynamic_slice(op: Op):
    x = op.t("x")
    d = int(op.arg("dim")) % x.rank
    size, step = int(op.arg("size")), int(op.arg("step"))
    y = ops.dynamic_slice(x, _start(op), axes=[d], sizes=[size], no_overlap=False)
    if step > 1:
        y = ops.slice(y, start=[0], stop=[size], step=[step], axis=[d])
    return y


@aten("poptorch::dynamic_update")
def dynamic_update(op: Op):
    x = op.t("x")
    d = int(op.arg("dim")) % x.rank
    return ops.dynamic_update(x, _start(op), op.t("src", x.dtype), axes=[d], sizes=[int(op.arg("size"))],
                              no_overlap=False)
