"""roi_align and its input gradient: RoiAlign / RoiAlignGrad vertices over channel blocks.

Which pixels a region samples is known only when the program runs, so (as for the other
data-dependent ops, lowering/columns.py) the image is laid out by channel: each tile holds every
pixel of all N images for a few channels, the small rois and batch-index tensors are broadcast to
those tiles (one multicast exchange each), and each vertex pools its own channels for every
region. Output and gradient use the same channel blocks, so nothing else crosses tiles.
"""
from __future__ import annotations

import numpy as np

import ipu

from ..columns import ColumnPlan
from ..registry import lowering_rule


def _table(view: ipu.Tensor) -> ipu.Tensor:
    """(A, C, *rest) -> the (1, A * prod(rest), C) table whose columns are the channels."""
    idx = np.moveaxis(view.index(), 1, -1)
    return ipu.Tensor(view.variable, idx.reshape(1, -1, view.shape[1]), (1, idx.size // view.shape[1], view.shape[1]))


def _untable(var: ipu.Variable, pos: np.ndarray, shape) -> ipu.Tensor:
    """The (A, C, *rest) view of a (1, A * prod(rest), C) table laid out at `pos`."""
    a, c, rest = shape[0], shape[1], tuple(shape[2:])
    idx = np.moveaxis(pos.reshape((a,) + rest + (c,)), -1, 1)
    return ipu.Tensor(var, idx, tuple(shape))


def _vertices(ctx, op, codelet, image_var, image_rows, rois_b, batch_b, other_var, other_rows, plan, x_shape):
    N, C, H, W = x_shape
    PH, PW = op.attrs["output_size"]
    K = op.inputs[1].shape[0]
    starts_img = plan.starts(image_rows)
    starts_out = plan.starts(other_rows)
    cs = ctx.compute_set(codelet.lower())
    w = plan.width
    ip = np.stack([np.full(plan.num_blocks, v, np.int64) for v in (N, H, W, PH, PW, op.attrs["sampling_ratio"])]
                  + [w], axis=1)
    ctx.g.add_vertices(cs, codelet, plan.tile, {
        "in": (image_var, starts_img, w * image_rows),
        "rois": (rois_b, plan.pair * 4 * K, np.full(plan.num_blocks, 4 * K)),
        "batch": (batch_b, plan.pair * K, np.full(plan.num_blocks, K)),
        "out": (other_var, starts_out, w * other_rows),
    }, fp={"spatial_scale": np.full(plan.num_blocks, op.attrs["spatial_scale"])}, ip=dict(zip(
        ("N", "H", "W", "PH", "PW", "sampling_ratio", "width"), ip.T)))
    ctx.emit(ipu.Execute(cs, name=cs.name))


def _plan_and_indices(ctx, op, x_shape, et):
    N, C, H, W = x_shape
    plan = ColumnPlan(ctx, 1, C, N * H * W, et.itemsize)
    K = op.inputs[1].shape[0]
    rois = ctx.value(op.inputs[1])
    batch = ctx.value(op.inputs[2])
    rois_b = plan.broadcast(ipu.Tensor(rois.variable, rois.index().reshape(1, 4 * K), (1, 4 * K)), "rois")
    batch_b = plan.broadcast(ipu.Tensor(batch.variable, batch.index().reshape(1, K), (1, K)), "batch_index")
    return plan, rois_b, batch_b


@lowering_rule("roi_align")
def roi_align(ctx, op):
    x = ctx.value(op.inputs[0])
    t_out = op.outputs[0]
    et = ctx.etype(op.inputs[0])
    N, C, H, W = x.shape
    K, _, PH, PW = t_out.shape
    plan, rois_b, batch_b = _plan_and_indices(ctx, op, x.shape, et)
    img, _ = plan.place(_table(x), "image")
    out, _ = plan.variable("pooled", K * PH * PW, et)
    if out.numel and K:
        _vertices(ctx, op, "RoiAlign", img, N * H * W, rois_b, batch_b, out, K * PH * PW, plan, x.shape)
    ctx.bind(t_out, _untable(out, plan.positions(K * PH * PW), t_out.shape))


@lowering_rule("roi_align_grad")
def roi_align_grad(ctx, op):
    dy = ctx.value(op.inputs[0])
    t_out = op.outputs[0]
    et = ctx.etype(op.inputs[0])
    N, C, H, W = t_out.shape
    K, _, PH, PW = dy.shape
    plan, rois_b, batch_b = _plan_and_indices(ctx, op, t_out.shape, et)
    grad_in, _ = plan.place(_table(dy), "grad")
    dx, _ = plan.variable("image_grad", N * H * W, et)
    if dx.numel:
        _vertices(ctx, op, "RoiAlignGrad", dx, N * H * W, rois_b, batch_b, grad_in, K * PH * PW, plan, t_out.shape)
    ctx.bind(t_out, _untable(dx, plan.positions(N * H * W), t_out.shape))
