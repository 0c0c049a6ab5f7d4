"""Reductions over axes, built on blocks.reduce (two-stage: per tile, then across tiles)."""
from __future__ import annotations

import numpy as np

from .. import blocks
from ..registry import lowering_rule

_DIRECT = {"sum": "sum", "max": "max", "min": "min", "prod": "prod", "sumsquare": "sum_squares",
           "l1": "abs_sum"}


def _axes(op):
    return tuple(op.attrs["axes"])


def _count(x, axes) -> int:
    return int(np.prod([x.shape[a] for a in axes], dtype=np.int64)) if axes else 1


@lowering_rule(*_DIRECT)
def reduce_direct(ctx, op):
    x = ctx.value(op.inputs[0])
    out = blocks.reduce(ctx, x, _axes(op), _DIRECT[op.type], keepdims=op.attrs["keepdims"], suffix=op.type)
    ctx.bind(op.outputs[0], out.reshape(tuple(op.outputs[0].shape)))


@lowering_rule("mean")
def mean(ctx, op):
    x = ctx.value(op.inputs[0])
    s = blocks.reduce(ctx, x, _axes(op), "sum", keepdims=op.attrs["keepdims"], suffix="sum")
    inv = blocks.scalar_constant(ctx, 1.0 / max(_count(x, _axes(op)), 1), x.dtype, "inv_count")
    ctx.bind(op.outputs[0], blocks.binary(ctx, "mul", s, inv, suffix="mean").reshape(tuple(op.outputs[0].shape)))


@lowering_rule("l2")
def l2(ctx, op):
    x = ctx.value(op.inputs[0])
    s = blocks.reduce(ctx, x, _axes(op), "sum_squares", keepdims=op.attrs["keepdims"], suffix="sumsquare")
    ctx.bind(op.outputs[0], blocks.unary(ctx, "sqrt", s).reshape(tuple(op.outputs[0].shape)))


@lowering_rule("logsum")
def logsum(ctx, op):
    x = ctx.value(op.inputs[0])
    s = blocks.reduce(ctx, x, _axes(op), "sum", keepdims=op.attrs["keepdims"], suffix="sum")
    ctx.bind(op.outputs[0], blocks.unary(ctx, "log", s).reshape(tuple(op.outputs[0].shape)))


def logsumexp_view(ctx, x, axes, keepdims):
    """max + log(sum(exp(x - max))): stable for large inputs."""
    m = blocks.reduce(ctx, x, axes, "max", keepdims=True, suffix="max")
    e = blocks.unary(ctx, "exp", blocks.binary(ctx, "sub", x, m, shape=x.shape, suffix="shift"))
    s = blocks.reduce(ctx, e, axes, "sum", keepdims=True, suffix="sum")
    out = blocks.binary(ctx, "add", blocks.unary(ctx, "log", s), m, suffix="logsumexp")
    if keepdims:
        return out
    return out.reshape(tuple(d for i, d in enumerate(x.shape) if i not in axes))


@lowering_rule("logsumexp")
def logsumexp(ctx, op):
    x = ctx.value(op.inputs[0])
    axes = tuple(a % max(x.rank, 1) for a in _axes(op))
    ctx.bind(op.outputs[0], logsumexp_view(ctx, x, axes, op.attrs["keepdims"]).reshape(tuple(op.outputs[0].shape)))
