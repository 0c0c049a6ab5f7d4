"""Gradients of the windowed ops (popxl/ops/conv.py): conv and conv_transpose (both gradients are
convolutions: the input gradient with flipped weights, the weight gradient of the input by the
output gradient), max_pool and average_pool (per kernel offset, a strided scatter of the output
gradient)."""
import numpy as np

import popxl.ops as ops

from popxl.ops._interpolation import axis_matrix

from ._registry import grad_rule
from ._util import const, invert_perm, no_grads, scatter_strided


def _conv_input_grad(g, w, x_shape, strides, pads, dilations, groups):
    """The gradient of conv's input, as a convolution (PopART's ConvFlipWeights + Conv): the output
    gradient dilated by the strides and padded, convolved with the flipped weights whose channel axes
    are swapped within each group."""
    n = len(strides)
    kernel = tuple(w.shape[2:])
    out_sp = g.shape[2:]
    gd = g
    for a in range(n):
        if strides[a] > 1 and out_sp[a] > 0:
            gd = scatter_strided(gd, 2 + a, 0, strides[a], (out_sp[a] - 1) * strides[a] + 1)
    m, cg = w.shape[0], w.shape[1]
    mg = m // groups
    wf = ops.slice(w, start=[-1] * n, stop=[-k - 1 for k in kernel], step=[-1] * n, axis=list(range(2, 2 + n)))
    wt = ops.reshape(wf, (groups, mg, cg) + kernel)
    wt = ops.transpose(wt, (0, 2, 1) + tuple(range(3, 3 + n)))
    wt = ops.reshape(wt, (groups * cg, mg) + kernel)
    begin, end = [], []
    for a in range(n):
        span = (kernel[a] - 1) * dilations[a]
        pl = span - pads[a]
        pr = x_shape[2 + a] - gd.shape[2 + a] - pl + span
        lo, hi = max(0, -pl), gd.shape[2 + a] - max(0, -pr)
        if lo > 0 or hi < gd.shape[2 + a]:
            gd = ops.slice(gd, start=[lo], stop=[hi], step=[1], axis=[2 + a])
        begin.append(max(pl, 0))
        end.append(max(pr, 0))
    return ops.conv(gd, wt, stride=(1,) * n, padding=tuple(begin + end), dilation=dilations, groups=groups)


def _weight_grad(x, g, w_shape, strides, pads, dilations, groups):
    """One conv_weights_grad op (PopART's ConvWeightsGradOp): dW[g Mg + m, c, k] = sum over n, o of
    dy[n, g Mg + m, o] x_pad[n, g Cg + c, o s + k d]. Its lowering plans it as poplin plans a weight
    update (the groups one dimension of the plan), with no transposed copies of x or dy."""
    from popxl.ops.conv import _conv_weights_grad
    return _conv_weights_grad(x, g, tuple(w_shape[2:]), strides, pads, dilations, groups)


@grad_rule("conv")
def _conv(ctx, op, grads):
    g = grads[0]
    x, w = op.inputs
    strides, pads, dilations, groups = (op.attrs["strides"], op.attrs["pads"], op.attrs["dilations"],
                                        op.attrs["groups"])
    out = no_grads(2)
    if ctx.wants(0):
        out[0] = _conv_input_grad(g, ctx.input(1), x.shape, strides, pads, dilations, groups)
    if ctx.wants(1):
        out[1] = _weight_grad(ctx.input(0), g, w.shape, strides, pads, dilations, groups)
    return out


@grad_rule("conv_transpose")
def _conv_transpose(ctx, op, grads):
    """conv_transpose is the adjoint of conv with the same weight: its input gradient is a conv
    of the output gradient, its weight gradient that of a conv whose input is the output gradient
    and whose output gradient is the input."""
    g = grads[0]
    x, w = op.inputs
    strides, pads, dilations, groups = (op.attrs["strides"], op.attrs["pads"], op.attrs["dilations"],
                                        op.attrs["groups"])
    out = no_grads(2)
    if ctx.wants(0):
        dx = ops.conv(g, ctx.input(1), stride=strides, padding=pads, dilation=dilations, groups=groups)
        if dx.shape != x.shape:
            raise NotImplementedError("autodiff: conv_transpose with an explicit output_shape that does not match "
                                      "its output padding has no gradient rule.")
        out[0] = dx
    if ctx.wants(1):
        out[1] = _weight_grad(g, ctx.input(0), w.shape, strides, pads, dilations, groups)
    return out


def _window_grad(ctx, op, g, kind):
    """Gradient of a pool: for every kernel offset, the output gradient (masked where the window's
    element is the maximum, or scaled by 1 / window count) goes back to the strided positions that
    offset read; the padded border is cut off at the end."""
    x = op.inputs[0]
    kernel, strides, dilations, pads = (tuple(op.attrs["kernel_size"]), op.attrs["strides"], op.attrs["dilations"],
                                        op.attrs["pads"])
    n = len(kernel)
    spatial, out_sp = x.shape[2:], g.shape[2:]
    lengths = [max(pads[a] + spatial[a] + pads[n + a],
                   (out_sp[a] - 1) * strides[a] + (kernel[a] - 1) * dilations[a] + 1) for a in range(n)]
    dt = g.dtype
    if kind == "max":
        xp = ctx.input(0)
        for a in range(n):  # pad with -inf up to the length every window reads
            before, after = pads[a], lengths[a] - pads[a] - spatial[a]
            parts = []
            if before:
                parts.append(const(np.full(xp.shape[:2 + a] + (before,) + xp.shape[3 + a:], -np.inf), dt))
            parts.append(xp)
            if after:
                parts.append(const(np.full(xp.shape[:2 + a] + (after,) + xp.shape[3 + a:], -np.inf), dt))
            if len(parts) > 1:
                xp = ops.concat(parts, 2 + a)
        y = ctx.output(0)
    else:
        # count_include_pad = 0 (as the lowering): divide by the real elements of each window
        counts = np.ones(out_sp, np.float64)
        for a in range(n):
            start = np.arange(out_sp[a]) * strides[a] - pads[a]
            pos = start[:, None] + np.arange(kernel[a])[None, :] * dilations[a]
            inside = ((pos >= 0) & (pos < spatial[a])).sum(1)
            shape = [1] * n
            shape[a] = out_sp[a]
            counts = counts * inside.reshape(shape)
        gs = ops.mul(g, const(1.0 / np.maximum(counts, 1), dt))
    total = None
    for kidx in np.ndindex(*kernel):
        starts = [kidx[a] * dilations[a] for a in range(n)]
        if kind == "max":
            stops = [st + strides[a] * (out_sp[a] - 1) + 1 for a, st in enumerate(starts)]
            xs = ops.slice(xp, start=starts, stop=stops, step=list(strides), axis=list(range(2, 2 + n)))
            c = ops.mul(g, ops.cast(ops.equal(xs, y), dt))
        else:
            c = gs
        for a in range(n):
            c = scatter_strided(c, 2 + a, starts[a], strides[a], lengths[a])
        total = c if total is None else ops.add(total, c)
    assert total is not None  # a window has at least one position (the pool ops check kernel >= 1)
    if any(pads[a] or lengths[a] != spatial[a] for a in range(n)):
        total = ops.slice(total, start=list(pads[:n]), stop=[pads[a] + spatial[a] for a in range(n)], step=[1] * n,
                          axis=list(range(2, 2 + n)))
    return total


@grad_rule("average_pool")
def _average_pool(ctx, op, grads):
    return [_window_grad(ctx, op, grads[0], "avg")]


@grad_rule("max_pool")
def _max_pool(ctx, op, grads):
    """Every element equal to its window's maximum receives that window's gradient."""
    return [_window_grad(ctx, op, grads[0], "max")]


@grad_rule("interpolate")
def _interpolate(ctx, op, grads):
    """Nearest, linear and cubic resizing are linear and separable: out = M_a @ x along each
    resized axis a, so the input gradient applies the transposed matrices M_a^T (a matmul with a
    constant, the resized axis moved last), in reverse order."""
    x, g = op.inputs[0], grads[0]
    out_shape = op.outputs[0].shape
    for a in reversed(range(x.rank)):
        n_in, n_out, s = x.shape[a], out_shape[a], op.attrs["scale_factor"][a]
        if n_in == n_out and s == 1.0:
            continue
        m = axis_matrix(n_in, n_out, s, op.attrs)  # (n_out, n_in): out = m @ x along axis a
        perm = [i for i in range(g.rank) if i != a] + [a]
        moved = ops.transpose(g, perm) if a != g.rank - 1 else g
        res = ops.matmul(moved, const(m, g.dtype, f"interpolate_grad_{a}"))  # dx[.., i] = sum_j g[.., j] m[j, i]
        g = ops.transpose(res, invert_perm(perm)) if a != g.rank - 1 else res
    return [g]


@grad_rule("roi_align")
def _roi_align(ctx, op, grads):
    """The image gets RoiAlignGrad of the output gradient; the regions and batch indices get none
    (as in PopART, whose RoiAlign gradient is for the image only)."""
    from popxl.ops.conv import _roi_align_grad
    return [_roi_align_grad(grads[0], ctx.input(1), ctx.input(2), op.inputs[0].shape, op.attrs), None, None]
