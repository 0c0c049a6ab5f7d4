"""Gradients of the reductions, cumsum and topk (popxl/ops/reduce.py)."""
import numpy as np

import popxl.ops as ops

from ._registry import grad_rule, non_differentiable
from ._util import const, expand, flip, mask, reshape_keepdims

non_differentiable("argmax", "argmin")


def _gk(op, g):
    """The output gradient with the reduced axes kept (size 1)."""
    return reshape_keepdims(g, op.inputs[0].shape, op.attrs["axes"])


def _yk(ctx, op):
    return reshape_keepdims(ctx.output(0), op.inputs[0].shape, op.attrs["axes"])


def _count(op) -> int:
    shape = op.inputs[0].shape
    return int(np.prod([shape[a] for a in op.attrs["axes"]], dtype=np.int64))


@grad_rule("sum")
def _sum(ctx, op, grads):
    return [expand(_gk(op, grads[0]), op.inputs[0].shape)]


@grad_rule("mean")
def _mean(ctx, op, grads):
    g = grads[0]
    n = max(_count(op), 1)
    return [expand(ops.mul(_gk(op, g), const(1.0 / n, g.dtype)), op.inputs[0].shape)]


@grad_rule("max", "min")
def _max(ctx, op, grads):
    """The gradient goes to every element equal to the result."""
    g = grads[0]
    m = mask(ops.equal(ctx.input(0), _yk(ctx, op)), g.dtype)
    return [ops.mul(m, _gk(op, g))]


@grad_rule("prod")
def _prod(ctx, op, grads):
    """d prod / dx_i = prod / x_i (inputs must be non-zero)."""
    g = grads[0]
    return [ops.mul(_gk(op, g), ops.div(_yk(ctx, op), ctx.input(0)))]


@grad_rule("l1")
def _l1(ctx, op, grads):
    return [ops.mul(_gk(op, grads[0]), ops.sign(ctx.input(0)))]


@grad_rule("l2")
def _l2(ctx, op, grads):
    return [ops.mul(ops.div(_gk(op, grads[0]), _yk(ctx, op)), ctx.input(0))]


@grad_rule("sumsquare")
def _sumsquare(ctx, op, grads):
    g = grads[0]
    return [ops.mul(ops.mul(_gk(op, g), const(2.0, g.dtype)), ctx.input(0))]


@grad_rule("logsumexp")
def _logsumexp(ctx, op, grads):
    return [ops.mul(_gk(op, grads[0]), ops.exp(ops.sub(ctx.input(0), _yk(ctx, op))))]


@grad_rule("logsum")
def _logsum(ctx, op, grads):
    # y = log(sum x): dy/dx = 1 / sum x = exp(-y)
    return [expand(ops.mul(_gk(op, grads[0]), ops.exp(ops.negate(_yk(ctx, op)))), op.inputs[0].shape)]


@grad_rule("median")
def _median(ctx, op, grads):
    """The gradient goes to the median element of each row (found by the op's index output, which
    counts along the reduced axes flattened in order)."""
    g = grads[0]
    if g is None:
        return [None]
    x = op.inputs[0]
    axes = tuple(op.attrs["axes"])
    kept = [i for i in range(x.rank) if i not in axes]
    perm = kept + list(axes)
    kept_shape = tuple(x.shape[i] for i in kept)
    red_shape = tuple(x.shape[i] for i in axes)
    rows = int(np.prod(kept_shape, dtype=np.int64))
    k = int(np.prod(red_shape, dtype=np.int64))
    g2 = ops.reshape(g, (rows, 1))
    idx = ops.reshape(ctx.output(1), (rows, 1))
    d = ops.scatter_reduce(g2, idx, "sum", axis=1, axis_size=k)
    d = ops.reshape(d, kept_shape + red_shape)
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return [d if perm == list(range(x.rank)) else ops.transpose(d, inv)]


@grad_rule("cumsum")
def _cumsum(ctx, op, grads):
    """The gradient of a cumulative sum is the cumulative sum of the gradient taken the other way
    (PopART's CumSumGradOp): exclusive stays exclusive, reverse turns forward."""
    g = grads[0]
    axis = op.attrs["axis"]
    exclusive, reverse = bool(op.attrs.get("exclusive")), bool(op.attrs.get("reverse"))
    if not exclusive and not reverse:
        return [flip(ops.cumsum(flip(g, axis), axis), axis)]
    from popxl.ops.reduce import _cumsum

    return [_cumsum(g, axis, exclusive, not reverse)]


@grad_rule("topk")
def _topk(ctx, op, grads):
    """Scatter the gradient of the values back to their indices."""
    g = grads[0]
    x = op.inputs[0]
    axis = op.attrs["axis"]
    if g is None:
        return [None]
    return [ops.scatter_reduce(g, ctx.output(1), "sum", axis=axis, axis_size=x.shape[axis])]
