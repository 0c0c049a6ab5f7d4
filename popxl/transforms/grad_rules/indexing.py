"""Gradients of the data-dependent indexing ops (popxl/ops/indexing.py): gather / tied_gather
(a scatter-add of the gradient), scatter, scatter_reduce (sum), dynamic_slice,
dynamic_update and onehot."""
import numpy as np

import popxl
import popxl.ops as ops

from ._registry import grad_rule
from ._util import const, no_grads, zeros


def _gather_grad(g, indices, x_shape, axis):
    """Scatter-add ``g`` (shape x[:axis] + indices.shape + x[axis+1:]) into a zero tensor of
    ``x_shape`` at ``indices`` along ``axis``."""
    pre, post = tuple(x_shape[:axis]), tuple(x_shape[axis + 1:])
    k = indices.nelms
    g3 = ops.reshape(g, pre + (k,) + post)
    idx = indices if indices.shape == (k,) else ops.reshape(indices, (k,))
    return ops.scatter_reduce(g3, idx, "sum", axis=axis, axis_size=x_shape[axis])


@grad_rule("gather", "tied_gather")
def _gather(ctx, op, grads):
    x = op.inputs[0]
    return [_gather_grad(grads[0], ctx.input(1), x.shape, op.attrs["axis"]), None]


@grad_rule("grouped_gather")
def _grouped_gather(ctx, op, grads):
    """Per group, a scatter-add of the gradient into the gathered rows: grouped_scatter_reduce
    with indices spread over the gradient's shape (each group scatters with its own indices)."""
    x, indices = op.inputs[0], op.inputs[1]
    axis, groups = op.attrs["axis"], op.attrs["group_size"]
    pre, post = tuple(x.shape[:axis]), tuple(x.shape[axis + 1:])
    k = indices.nelms // groups
    g = ops.reshape(grads[0], pre + (k,) + post)
    idx = ops.reshape(ctx.input(1), (groups,) + (1,) * (axis - 1) + (k,) + (1,) * len(post))
    idx = idx + zeros(g.shape, idx.dtype, "grouped_gather_grad_index")
    return [ops.grouped_scatter_reduce(g, idx, "sum", axis=axis, axis_size=x.shape[axis], group_size=groups),
            None]


@grad_rule("scatter")
def _scatter(ctx, op, grads):
    """out = t with out[idx] = values: t gets the gradient except at the scattered positions."""
    g = grads[0]
    values = op.inputs[2]
    out = no_grads(3)
    if ctx.wants(0):
        out[0] = ops.scatter(g, ctx.input(1), zeros(values.shape, g.dtype), axis=op.attrs["axis"])
    if ctx.wants(2):
        out[2] = _gather_elements(g, ctx.input(1), op.attrs["axis"])
    return out


def _gather_elements(g, indices, axis):
    """g[..., indices[i, j], ...] along ``axis`` (PopART's ScatterUpdateGrad): a gather from the
    flattened gradient at the flat positions base + indices x stride, where base holds each
    element's flat offset with its ``axis`` coordinate zeroed."""
    stride = int(np.prod(g.shape[axis + 1:], dtype=np.int64))
    coords = np.indices(indices.shape, dtype=np.int64)
    coords[axis] = 0
    base = np.ravel_multi_index(tuple(coords), g.shape).astype(np.int32)
    idx = indices if indices.dtype == popxl.int32 else ops.cast(indices, popxl.int32)
    flat = ops.add(ops.mul(idx, const(stride, popxl.int32, "axis_stride")), const(base, popxl.int32, "flat_base"))
    return ops.gather(ops.reshape(g, (g.nelms,)), flat, axis=0)


@grad_rule("scatter_reduce")
def _scatter_reduce(ctx, op, grads):
    """Sum reduction: each data slice gets the gradient of the slot it went to."""
    g = grads[0]
    if op.attrs["reduction"] != "sum":
        raise NotImplementedError(f"autodiff: scatter_reduce with reduction {op.attrs['reduction']!r} has no "
                                  "gradient rule (only 'sum').")
    _data, indices = op.inputs[0], op.inputs[1]
    axis = op.attrs["axis"]
    out = no_grads(len(op.inputs))
    if ctx.wants(0):
        if indices.rank != 1:
            raise NotImplementedError("autodiff: scatter_reduce gradient needs 1-D indices along the axis.")
        out[0] = ops.gather(g, ctx.input(1), axis=axis)
    if len(op.inputs) > 2 and ctx.wants(2):
        out[2] = g
    return out


@grad_rule("dynamic_slice")
def _dynamic_slice(ctx, op, grads):
    x = op.inputs[0]
    g = grads[0]
    base = zeros(x.shape, g.dtype)
    return [ops.dynamic_update_(base, ctx.input(1), g, op.attrs["axes"], op.attrs["sizes"],
                                op.attrs["no_overlap"]), None]


@grad_rule("dynamic_update")
def _dynamic_update(ctx, op, grads):
    g = grads[0]
    u = op.inputs[2]
    axes, sizes, no_overlap = op.attrs["axes"], op.attrs["sizes"], op.attrs["no_overlap"]
    out = no_grads(3)
    if ctx.wants(0):
        out[0] = ops.dynamic_update(g, ctx.input(1), zeros(u.shape, g.dtype), axes, sizes, no_overlap)
    if ctx.wants(2):
        out[2] = ops.dynamic_slice(g, ctx.input(1), axes, sizes, no_overlap)
    return out


@grad_rule("onehot")
def _onehot(ctx, op, grads):
    """values = (off, on): d/d on = sum of g at the hot positions, d/d off = sum of g elsewhere."""
    g = grads[0]
    if not ctx.wants(1):
        return [None, None]
    hot = ops.onehot(ctx.input(0), op.attrs["num_classes"], const([0.0, 1.0], g.dtype), op.attrs["axis"])
    on = ops.sum(ops.mul(g, hot))
    total = ops.sum(g)
    off = ops.sub(total, on)
    return [None, ops.concat([ops.reshape(off, (1,)), ops.reshape(on, (1,))], 0)]

