"""Gradients of the layout ops (popxl/ops/shape.py): reshape (flatten, squeeze), transpose, slice,
subsample, concat, split."""
import popxl.ops as ops

from ._registry import grad_rule
from ._util import invert_perm, scatter_strided, zeros


@grad_rule("reshape")
def _reshape(ctx, op, grads):
    return [ops.reshape(grads[0], op.inputs[0].shape)]


@grad_rule("transpose")
def _transpose(ctx, op, grads):
    return [ops.transpose(grads[0], invert_perm(op.attrs["permutation"]))]


@grad_rule("slice")
def _slice(ctx, op, grads):
    """Put the gradient back where the slice came from, zeros elsewhere."""
    g = grads[0]
    x = op.inputs[0]
    for a, s, st in zip(op.attrs["axes"], op.attrs["starts"], op.attrs["steps"]):
        g = scatter_strided(g, a, s, st, x.shape[a])
    return [g]


@grad_rule("subsample")
def _subsample(ctx, op, grads):
    g = grads[0]
    x = op.inputs[0]
    for a, st in enumerate(op.attrs["strides"]):
        if st != 1:
            g = scatter_strided(g, a, 0, st, x.shape[a])
    return [g]


@grad_rule("concat")
def _concat(ctx, op, grads):
    g = grads[0]
    axis = op.attrs["axis"]
    sizes = [x.shape[axis] for x in op.inputs]
    if len(sizes) == 1:
        return [g]
    parts = ops.split(g, sizes, axis)
    return [p if ctx.wants(i) else None for i, p in enumerate(parts)]


@grad_rule("split")
def _split(ctx, op, grads):
    axis = op.attrs["axis"]
    parts = [g if g is not None else zeros(o.shape, o.dtype) for g, o in zip(grads, op.outputs)]
    parts = [p for p in parts if p.shape[axis] > 0]
    if len(parts) == 1:
        return [parts[0]]
    return [ops.concat(parts, axis)]
