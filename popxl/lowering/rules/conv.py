"""Convolution and pooling as poplibs lowers them in spirit.

Dense convolutions (and grouped ones with at least an AMP input group of channels per group):
windows gathered by the exchange (im2col with static index arrays: an ipu view of the padded
input), then one planned matmul with the groups as its batch. Grouped and depthwise convolutions
with few channels per group: poplin's HMAC / VMAC methods, one plan over the groups
(codelets/plans/conv_plan.py, conv_build.py). Pools: the windows, then a reduction."""
from __future__ import annotations

import numpy as np

import ipu
from codelets.matmul import amp_geometry
from codelets.plans.conv_build import build_forward, build_weight_update, problem_of
from codelets.plans.matmul_build import build_matmul
from codelets.plans.matmul_output import output_in_cells

from .. import blocks as B
from ..registry import lowering_rule
from .float8 import check_log2_scale_range


def _padded(ctx, x: ipu.Tensor, out_spatial, kernel, strides, dilations, pads, value):
    """x padded with `value` so that every window of the output lies inside; returns the view."""
    n = len(kernel)
    begin = pads[:n]
    ext = []
    for i in range(n):
        need = (out_spatial[i] - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1
        ext.append(max(need, x.shape[2 + i] + begin[i]))
    if all(b == 0 for b in begin) and all(e <= x.shape[2 + i] for i, e in enumerate(ext)):
        return x
    shape = tuple(x.shape[:2]) + tuple(ext)
    padded = ctx.new_var(shape, x.dtype, ctx.name("padded"))
    fill = B.scalar_constant(ctx, value, x.dtype, "pad_value")
    ctx.copy(fill.reshape(()).broadcast(shape), padded, "pad_fill")
    key = (slice(None), slice(None)) + tuple(slice(begin[i], begin[i] + min(x.shape[2 + i], ext[i] - begin[i]))
                                             for i in range(n))
    interior = padded[key]
    src = x[(slice(None), slice(None)) + tuple(slice(0, s) for s in interior.shape[2:])]
    ctx.copy(src, interior, "pad_copy")
    return padded


def _windows(p: ipu.Tensor, out_spatial, kernel, strides, dilations) -> ipu.Tensor:
    """View of shape (N, C, *out_spatial, *kernel): element [n, c, o.., k..] of every window."""
    n = len(kernel)
    idx = p.index()
    keys = [slice(None), slice(None)]
    for i in range(n):
        pos = (np.arange(out_spatial[i]) * strides[i])[:, None] + (np.arange(kernel[i]) * dilations[i])[None, :]
        shape = [1] * (2 * n)
        shape[i] = out_spatial[i]
        shape[n + i] = kernel[i]
        keys.append(pos.reshape(shape))
    win = idx[tuple(keys)]  # advanced indexing: (N, C, O..., K...)
    return ipu.Tensor(p.variable, win, win.shape)


def _direct(ctx, x_dtype, groups: int, cg: int, float8: bool) -> bool:
    """Grouped convolutions with fewer input channels per group than an AMP input group (8 floats,
    16 halves: the AMP would mostly multiply padding) run as poplin's HMAC method: one plan over the
    groups (codelets/plans/conv_plan.py) with ConvPartialHorizontalMac vertices."""
    if groups <= 1 or float8:
        return False
    return cg < amp_geometry(x_dtype == ipu.FLOAT16, ctx.target)["in_chans"]


def _unmapped(ctx, t_out) -> ipu.Variable:
    """The output variable of a convolution, left unmapped: the plan that computes it maps it."""
    return ctx.g.add_variable(t_out.id, tuple(t_out.shape), ctx.etype(t_out), ipu.TEMPORARY, debug=ctx.name())


def _grouped_direct(ctx, x, w, t_out, strides, dilations, pads, groups):
    """The output (an ipu variable the plan maps) of a grouped convolution of x (unpadded; `pads`
    are the lower paddings) with w, by conv_build.build_forward."""
    y = _unmapped(ctx, t_out)
    p = problem_of(x.shape, w.shape, t_out.shape, groups, strides, dilations, pads)
    ctx.emit(build_forward(ctx.g, x, w, y, p, name=ctx.name("conv")))
    return y


def _conv_core(ctx, padded, w, t_out, out_spatial, strides, dilations, groups, log2_scale=None) -> ipu.Tensor:
    """The output (N, M, *out_spatial) of the conv of an already padded input view with w (M, C/groups, *k), as
    one planned matmul with the groups as its batch: out^T [G, Mg, N*P] = w [G, Mg, Cg*Kk] @ the
    transposed im2col windows [G, Cg*Kk, N*P]. The windows' rows, one per (channel, kernel
    position), run along the output rows (runs of the padded input's rows, so the exchange moves
    whole rows), and the product lands in the NCHW output itself (a view of it, for a batch)."""
    kernel = tuple(w.shape[2:])
    nsp = len(kernel)
    N, C = padded.shape[:2]
    M = w.shape[0]
    Cg, Mg = C // groups, M // groups
    P = int(np.prod(out_spatial, dtype=np.int64))
    Kk = int(np.prod(kernel, dtype=np.int64))
    win = _windows(padded, out_spatial, kernel, strides, dilations)  # (N, C, O.., K..)
    # (N, C, O.., K..) -> (C, K.., N, O..): row (c, k) of the transposed im2col matrix
    perm = [1] + list(range(2 + nsp, 2 + 2 * nsp)) + [0] + list(range(2, 2 + nsp))
    cols_t = win.transpose(perm).reshape(groups, Cg * Kk, N * P)
    wg = w.reshape(groups, Mg, Cg * Kk)
    if groups == 1:
        cols_t, wg = cols_t.reshape(Cg * Kk, N * P), wg.reshape(Mg, Cg * Kk)

    def product_view(t):
        dst = t.reshape(N, groups, Mg, P).transpose(1, 2, 0, 3)
        return dst.reshape(Mg, N * P) if groups == 1 else dst.reshape(groups, Mg, N * P)

    out, plan = output_in_cells(ctx.g, t_out.id, tuple(t_out.shape), ctx.etype(t_out), wg, cols_t, product_view,
                                plan=ctx.planned.get(ctx.op), debug=ctx.name())
    check = log2_scale is not None and check_log2_scale_range(ctx)
    ctx.emit(build_matmul(ctx.g, wg, cols_t, product_view(out), plan=plan, name=ctx.name("matmul"),
                          log2_scale=log2_scale, check_range=check))
    return out


def _check_float(op, x):
    if op.type.endswith("_pow2scaled"):
        if not x.dtype.is_float8:
            raise TypeError(f"{op.name}: {op.type} takes float8 operands, not {x.dtype.name}")
    elif x.dtype not in (ipu.FLOAT32, ipu.FLOAT16):
        raise TypeError(f"{op.name}: {op.type} takes float32 or float16, not {x.dtype.name}")


def _log2_scale(ctx, op):
    """The scale input of a pow2-scaled conv (a one-element int32 view), else None."""
    return ctx.value(op.inputs[2]).reshape(1) if len(op.inputs) > 2 else None


@lowering_rule("conv", "conv_pow2scaled")
def conv(ctx, op):
    x, w = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    _check_float(op, x)
    t_out = op.outputs[0]
    kernel = tuple(w.shape[2:])
    out_spatial = tuple(t_out.shape[2:])
    strides, dilations, pads = op.attrs["strides"], op.attrs["dilations"], op.attrs["pads"]
    groups = op.attrs["groups"]
    if _direct(ctx, x.dtype, groups, w.shape[1], x.dtype.is_float8):
        ctx.bind(t_out, _grouped_direct(ctx, x, w, t_out, strides, dilations, pads, groups))
        return
    padded = _padded(ctx, x, out_spatial, kernel, strides, dilations, pads, 0.0)
    ctx.bind(t_out, _conv_core(ctx, padded, w, t_out, out_spatial, strides, dilations, groups, _log2_scale(ctx, op)))


@lowering_rule("conv_weights_grad")
def conv_weights_grad(ctx, op):
    """The weight gradient of a convolution (what autodiff records, PopART's ConvWeightsGradOp):
    for grouped convolutions with few channels per group, poplin's weight update with
    ConvPartialVerticalMac vertices; otherwise one planned matmul over the batch and the output
    positions, dW [G, Mg, Cg*Kk] = dy [G, Mg, N*P] @ windows [G, N*P, Cg*Kk], whose operands are
    views of the output gradient (runs of each image's positions) and of the input (its windows:
    runs down each image's positions, moved in that order and transposed on the tiles) and whose
    product lands in the weight gradient in its own layout, so the reduction of the partials
    writes whole rows of dW (as dW^T it wrote one element a run: MobileNetV2's final 1x1 weight
    gradient at batch 8 took 21 KiB of exchange code on one tile). No transposed copies of the
    activations."""
    x, dy = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    _check_float(op, x)
    t_out = op.outputs[0]
    a = op.attrs
    groups = a["groups"]
    dw = _unmapped(ctx, t_out)
    if _direct(ctx, x.dtype, groups, t_out.shape[1], x.dtype.is_float8):
        p = problem_of(x.shape, t_out.shape, dy.shape, groups, a["strides"], a["dilations"], a["pads"])
        ctx.emit(build_weight_update(ctx.g, x, dy, dw, p, name=ctx.name("weight_update")))
        ctx.bind(t_out, dw)
        return
    kernel = tuple(a["kernel_shape"])
    nsp = len(kernel)
    out_spatial = tuple(dy.shape[2:])
    N, C = x.shape[:2]
    M = dy.shape[1]
    Cg, Mg = C // groups, M // groups
    P = int(np.prod(out_spatial, dtype=np.int64))
    Kk = int(np.prod(kernel, dtype=np.int64))
    padded = _padded(ctx, x, out_spatial, kernel, a["strides"], a["dilations"], a["pads"], 0.0)
    win = _windows(padded, out_spatial, kernel, a["strides"], a["dilations"])  # (N, C, O.., K..)
    # (N, C, O.., K..) -> (N, O.., C, K..): row (n, o) of the im2col matrix, per group
    perm = [0] + list(range(2, 2 + nsp)) + [1] + list(range(2 + nsp, 2 + 2 * nsp))
    cols = win.transpose(perm).reshape(N * P, groups, Cg * Kk).transpose(1, 0, 2)
    g = dy.reshape(N, groups, Mg, P).transpose(1, 2, 0, 3).reshape(groups, Mg, N * P)
    dst = dw.reshape(groups, Mg, Cg * Kk)
    if groups == 1:
        g, cols, dst = g.reshape(Mg, N * P), cols.reshape(N * P, Cg * Kk), dst.reshape(Mg, Cg * Kk)
    ctx.emit(build_matmul(ctx.g, g, cols, dst, name=ctx.name("matmul")))
    ctx.bind(t_out, dw)


@lowering_rule("conv_transpose", "conv_transpose_pow2scaled")
def conv_transpose(ctx, op):
    """The adjoint of conv: spread the input with (stride - 1) zeros between elements, pad it by
    dilation x (kernel - 1) minus the padding on each side, and convolve (stride 1) with the weight
    flipped in space and with its two channel axes swapped per group."""
    x, w = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    _check_float(op, x)
    t_out = op.outputs[0]
    kernel = tuple(w.shape[2:])
    n = len(kernel)
    strides, dilations, pads = op.attrs["strides"], op.attrs["dilations"], op.attrs["pads"]
    groups = op.attrs["groups"]
    out_spatial = tuple(t_out.shape[2:])
    N, C = x.shape[:2]
    Cg = C // groups
    w.shape[1]
    # the zero-spread, padded input (cropped where the padding is larger than the kernel reach)
    lo = [dilations[i] * (kernel[i] - 1) - pads[i] for i in range(n)]
    ext = [out_spatial[i] + dilations[i] * (kernel[i] - 1) for i in range(n)]
    big = ctx.new_var((N, C) + tuple(ext), x.dtype, ctx.name("spread"))
    zero = B.scalar_constant(ctx, 0.0, x.dtype, "zero")
    ctx.copy(zero.reshape(()).broadcast(big.shape), big, "spread_zero")
    bidx = big.index()
    xidx = x.index()
    # index keys of the spread input and of x: all of N and C, then the kept positions per axis
    keys_b: list[slice | np.ndarray] = [slice(None), slice(None)]
    keys_x: list[slice | np.ndarray] = [slice(None), slice(None)]
    for i in range(n):
        pos = lo[i] + np.arange(x.shape[2 + i]) * strides[i]
        ok = (pos >= 0) & (pos < ext[i])
        shape = [1] * n
        shape[i] = int(ok.sum())
        keys_b.append(pos[ok].reshape(shape))
        keys_x.append(np.flatnonzero(ok).reshape(shape))
    dst = bidx[tuple(keys_b)]
    src = xidx[tuple(keys_x)]
    if dst.size:
        ctx.copy(ipu.Tensor(x.variable, src, src.shape), ipu.Tensor(big, dst, dst.shape), "spread_copy")
    # weight (C, Mg, k..) -> per group (Mg, Cg, k.. flipped), stacked to (M, Cg, k..)
    widx = w.index()
    flip = (slice(None), slice(None)) + (slice(None, None, -1),) * n
    parts = [np.swapaxes(widx[g * Cg:(g + 1) * Cg][flip], 0, 1) for g in range(groups)]
    wt = np.concatenate(parts, 0)
    w2 = ipu.Tensor(w.variable, wt, wt.shape)
    if _direct(ctx, x.dtype, groups, w2.shape[1], x.dtype.is_float8):
        ctx.bind(t_out, _grouped_direct(ctx, big, w2, t_out, (1,) * n, dilations, (0,) * (2 * n), groups))
        return
    ctx.bind(t_out, _conv_core(ctx, big, w2, t_out, out_spatial, (1,) * n, dilations, groups, _log2_scale(ctx, op)))


def _pool(ctx, op, reduce_op, pad_value):
    x = ctx.value(op.inputs[0])
    t_out = op.outputs[0]
    kernel = tuple(op.attrs["kernel_size"])
    out_spatial = tuple(t_out.shape[2:])
    strides, dilations, pads = op.attrs["strides"], op.attrs["dilations"], op.attrs["pads"]
    win = _windows(_padded(ctx, x, out_spatial, kernel, strides, dilations, pads, pad_value),
                   out_spatial, kernel, strides, dilations)
    rows = int(np.prod(t_out.shape, dtype=np.int64))
    red = B.reduce(ctx, win.reshape(rows, int(np.prod(kernel))), (1,), reduce_op, suffix=op.type)
    return x, red, kernel, out_spatial, strides, dilations, pads


@lowering_rule("max_pool")
def max_pool(ctx, op):
    _, red, *_ = _pool(ctx, op, "max", -np.inf)
    ctx.bind(op.outputs[0], red.reshape(tuple(op.outputs[0].shape)))


@lowering_rule("average_pool")
def average_pool(ctx, op):
    x, red, kernel, out_spatial, strides, dilations, pads = _pool(ctx, op, "sum", 0.0)
    n = len(kernel)
    # divide by the number of real (not padding) elements in each window (ONNX count_include_pad=0)
    counts = np.ones(out_spatial, np.float64)
    for i in range(n):
        start = np.arange(out_spatial[i]) * strides[i] - pads[i]
        pos = start[:, None] + np.arange(kernel[i])[None, :] * dilations[i]
        inside = ((pos >= 0) & (pos < x.shape[2 + i])).sum(1)
        shape = [1] * n
        shape[i] = out_spatial[i]
        counts = counts * inside.reshape(shape)
    inv = ctx.g.add_constant(ctx.name("inv_count"), (1.0 / np.maximum(counts, 1)).astype(x.dtype.numpy), x.dtype)
    ctx.tiles.map(ctx.g, inv)
    out_shape = tuple(op.outputs[0].shape)
    ctx.bind(op.outputs[0], B.binary(ctx, "mul", red.reshape(out_shape), inv, shape=out_shape, suffix="average"))
