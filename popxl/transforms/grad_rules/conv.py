"""Gradients of the windowed ops (popxl/ops/conv.py): conv (the input gradient is a transposed
convolution, the weight gradient a convolution of the input by the output gradient) and
average_pool without padding. max_pool has no rule yet."""
import numpy as np

import popxl.ops as ops

from ._registry import grad_rule
from ._util import const


def _swap01(t):
    perm = [1, 0] + list(range(2, t.rank))
    return ops.transpose(t, perm)


def _conv_input_grad(g, w, x_shape, strides, pads, dilations, groups):
    n = len(strides)
    out_sp = g.shape[2:]
    kernel = w.shape[2:]
    out_pad = []
    for a in range(n):
        full = strides[a] * (out_sp[a] - 1) + (kernel[a] - 1) * dilations[a] + 1 - pads[a] - pads[n + a]
        out_pad.append(x_shape[2 + a] - full)
    return ops.conv_transpose(g, w, stride=strides, padding=pads, dilation=dilations, groups=groups,
                              output_padding=tuple(out_pad))


def _conv_weight_grad(x, g, w_shape, strides, pads, dilations):
    """groups == 1: dW[m, c, k] = sum_{n, o} g[n, m, o] x_pad[n, c, o s + k d]."""
    xt = _swap01(x)  # (C, N, *S)
    gt = _swap01(g)  # (M, N, *O)
    dw = ops.conv(xt, gt, stride=dilations, padding=pads, dilation=strides)  # (C, M, *K')
    kernel = w_shape[2:]
    if dw.shape[2:] != tuple(kernel):
        n = len(kernel)
        dw = ops.slice(dw, start=[0] * n, stop=list(kernel), step=[1] * n, axis=list(range(2, 2 + n)))
    return _swap01(dw)


@grad_rule("conv")
def _conv(ctx, op, grads):
    g = grads[0]
    x, w = op.inputs
    strides, pads, dilations, groups = (op.attrs["strides"], op.attrs["pads"], op.attrs["dilations"],
                                        op.attrs["groups"])
    out = [None, None]
    if ctx.wants(0):
        out[0] = _conv_input_grad(g, ctx.input(1), x.shape, strides, pads, dilations, groups)
    if ctx.wants(1):
        xv = ctx.input(0)
        if groups == 1:
            out[1] = _conv_weight_grad(xv, g, w.shape, strides, pads, dilations)
        else:
            cg, mg = x.shape[1] // groups, w.shape[0] // groups
            xs = ops.split(xv, groups, 1)
            gs = ops.split(g, groups, 1)
            parts = [_conv_weight_grad(xs[i], gs[i], (mg, cg) + tuple(w.shape[2:]), strides, pads, dilations)
                     for i in range(groups)]
            out[1] = ops.concat(parts, 0)
    return out


@grad_rule("average_pool")
def _average_pool(ctx, op, grads):
    """Without padding every window has prod(kernel) elements: the gradient is a transposed
    convolution of the output gradient by a constant kernel of 1 / prod(kernel)."""
    g = grads[0]
    x = op.inputs[0]
    if any(op.attrs["pads"]) or op.attrs.get("ceil_mode"):
        raise NotImplementedError("autodiff: average_pool with padding or ceil_mode has no gradient rule yet.")
    kernel, strides, dilations = op.attrs["kernel_size"], op.attrs["strides"], op.attrs["dilations"]
    n, c = x.shape[0], x.shape[1]
    k = const(np.full((1, 1) + tuple(kernel), 1.0 / float(np.prod(kernel))), g.dtype)
    g1 = ops.reshape(g, (n * c, 1) + g.shape[2:])
    dx = _conv_input_grad(g1, k, (n * c, 1) + x.shape[2:], strides, (0,) * (2 * len(kernel)), dilations, 1)
    return [ops.reshape(dx, x.shape)]
