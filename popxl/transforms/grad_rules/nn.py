"""Gradients of the neural-network ops (popxl/ops/nn.py): softmax, group_norm (layer_norm),
batch_norm_inference, nll_loss and nll_loss_with_softmax_grad."""
import numpy as np

import popxl.ops as ops
from popxl import dtypes
from popxl.lowering.rules.nn import NLL_GRAD_EPS
from popxl.tensor import Constant

from ._registry import grad_rule
from ._util import const, mask, no_grads



@grad_rule("lamb_square")
def _lamb_square(ctx, op, grads):
    """sum(t^2) as float32: d/dt = 2 t g."""
    x = op.inputs[0]
    g = ops.cast(grads[0], x.dtype)
    return [ops.mul(ops.mul(ctx.input(0), g), const(2.0, x.dtype))]


@grad_rule("softmax")
def _softmax(ctx, op, grads):
    """dx = y (g - sum(g y, axis))."""
    g, y = grads[0], ctx.output(0)
    axis = op.attrs["axis"]
    gy = ops.mul(g, y)
    return [ops.mul(y, ops.sub(g, ops.sum(gy, axis, keepdims=True)))]


def _channel_shape(x, c):
    return (1, c) + (1,) * (x.rank - 2)


def _all_but_channel(x):
    return [i for i in range(x.rank) if i != 1]


@grad_rule("group_norm")
def _group_norm(ctx, op, grads):
    """Uses the mean and inverse standard deviation the forward op outputs; their own gradients
    (if any) are ignored."""
    g = grads[0]
    if g is None:
        return [None, None, None]
    x, w, _ = op.inputs
    n, c = x.shape[0], x.shape[1]
    groups = op.attrs["num_groups"]
    m = x.nelms // max(n * groups, 1)
    x3 = ops.reshape(ctx.input(0), (n, groups, m))
    mean3 = ops.reshape(ctx.output(1), (n, groups, 1))
    inv3 = ops.reshape(ctx.output(2), (n, groups, 1))
    xhat3 = ops.mul(ops.sub(x3, mean3), inv3)
    out = no_grads(3)
    if ctx.wants(2):
        out[2] = ops.sum(g, _all_but_channel(x))
    if ctx.wants(1):
        xhat = ops.reshape(xhat3, x.shape)
        out[1] = ops.sum(ops.mul(g, xhat), _all_but_channel(x))
    if ctx.wants(0):
        dxhat = ops.mul(g, ops.reshape(ctx.input(1), _channel_shape(x, c)))
        d3 = ops.reshape(dxhat, (n, groups, m))
        t1 = ops.mean(d3, 2, keepdims=True)
        t2 = ops.mul(xhat3, ops.mean(ops.mul(d3, xhat3), 2, keepdims=True))
        dx3 = ops.mul(inv3, ops.sub(ops.sub(d3, t1), t2))
        out[0] = ops.reshape(dx3, x.shape)
    return out


@grad_rule("batch_norm_inference")
def _batch_norm_inference(ctx, op, grads):
    """y = scale (x - mean) / sqrt(var + eps) + bias, with fixed (input) statistics."""
    g = grads[0]
    x = op.inputs[0]
    c = x.shape[1]
    dt = g.dtype
    cs = _channel_shape(x, c)
    red = _all_but_channel(x)
    inv = ops.div(const(1.0, dt), ops.sqrt(ops.add(ctx.input(4), const(op.attrs["epsilon"], dt))))  # (C,)
    out = no_grads(5)
    if ctx.wants(0):
        out[0] = ops.mul(g, ops.reshape(ops.mul(ctx.input(1), inv), cs))
    if ctx.wants(2):
        out[2] = ops.sum(g, red)
    if ctx.wants(1) or ctx.wants(4):
        xc = ops.sub(ctx.input(0), ops.reshape(ctx.input(3), cs))
        gxc = ops.sum(ops.mul(g, xc), red)  # (C,)
        if ctx.wants(1):
            out[1] = ops.mul(gxc, inv)
        if ctx.wants(4):
            inv3 = ops.mul(ops.mul(inv, inv), inv)
            out[4] = ops.mul(ops.mul(gxc, ctx.input(1)), ops.mul(inv3, const(-0.5, dt)))
    if ctx.wants(3):
        out[3] = ops.negate(ops.mul(ops.sum(g, red), ops.mul(ctx.input(1), inv)))
    return out


@grad_rule("batch_norm_training")
def _batch_norm_training(ctx, op, grads):
    """One batch_norm_training_grad op (PopART's BatchNormGradOp) from the input, the scale and the
    statistics the forward op output. The statistics' own gradients (they only feed the running
    averages) are not propagated, as in PopART."""
    g = grads[0]
    if g is None:
        return [None, None, None]
    from popxl.ops.nn import _batch_norm_training_grad
    dx, dscale, dbias = _batch_norm_training_grad(g, ctx.input(0), ctx.input(1), ctx.output(1), ctx.output(2),
                                                  op.attrs["epsilon"])
    return [dx if ctx.wants(0) else None, dscale if ctx.wants(1) else None, dbias if ctx.wants(2) else None]


def _nll_probs_grad(ctx, op, g, log_prob: bool):
    """d loss / d probs for nll_loss (and the loss output of nll_loss_with_softmax_grad)."""
    probs, labels = op.inputs[0], op.inputs[1]
    dt = probs.dtype
    classes = probs.shape[-1]
    reduction = op.attrs["reduction"]
    ignore = op.attrs.get("ignore_index")
    lab = ctx.input(1)
    rows = tuple(probs.shape[:-1])
    if tuple(labels.shape) != rows:  # (N, 1) labels of (N, C) probs
        lab = ops.reshape(lab, rows)
        if reduction == "none":
            g = ops.reshape(g, rows)
    valid = None
    if ignore is not None:
        is_valid = ops.logical_not(ops.equal(lab, const(ignore, lab.dtype)))
        valid = mask(is_valid, dt)
        lab = ops.where(is_valid, lab, const(0, lab.dtype))
    hot = ops.onehot(lab, classes, const([0.0, 1.0], dt), len(rows))
    # per-sample scale, shape labels.shape
    if reduction == "none":
        scale = g
    else:
        scale = ops.reshape(g, ())
        if reduction == "mean":
            if valid is not None:
                scale = ops.div(scale, ops.sum(valid))
            else:
                scale = ops.mul(scale, const(1.0 / max(labels.nelms, 1), dt))
    if valid is not None:
        scale = ops.mul(valid, scale)
    if scale.shape != rows:
        scale = ops.add(ops.init(rows, dt, "nll_scale", "zero"), scale)
    scale = ops.reshape(scale, rows + (1,))
    d = ops.mul(ops.negate(hot), scale)
    if not log_prob:  # PopART's NllGradOpx divides by max(p, eps), so an underflowed p gives no inf
        d = ops.div(d, ops.maximum(ctx.input(0), const(NLL_GRAD_EPS[dt == dtypes.float16], dt)))
    return d


@grad_rule("nll_loss")
def _nll_loss(ctx, op, grads):
    return [_nll_probs_grad(ctx, op, grads[0], op.attrs.get("log_prob", False)), None]


@grad_rule("nll_loss_with_softmax_grad")
def _nll_loss_with_softmax_grad(ctx, op, grads):
    """The loss output's gradient. When ``probs`` comes straight from a softmax over the class
    axis, the precomputed ``dx`` output (scaled by the incoming gradient over ``loss_grad``) is the
    gradient of the softmax's input and is passed to it directly; otherwise the gradient with
    respect to ``probs`` is built as for nll_loss. The ``dx`` output itself is not differentiated."""
    from popxl.transforms.autodiff import _DirectGrad
    g = grads[0]
    if g is None or not ctx.wants(0):
        return [None, None, None]
    probs = op.inputs[0]
    producer = probs.producer
    if (producer is not None and producer.type == "softmax" and producer.attrs["axis"] == probs.rank - 1
            and ctx.is_only_grad_source(probs)):
        dx = ctx.output(1)
        scale = g if op.attrs["reduction"] != "none" else ops.reshape(g, tuple(probs.shape[:-1]) + (1,))
        if op.attrs["reduction"] != "none":
            scale = ops.reshape(scale, ())
        lg = op.inputs[2]
        if not (isinstance(lg, Constant) and np.all(np.asarray(lg._data) == 1)):
            lg_t = ops.reshape(ctx.input(2), ())
            scale = ops.div(scale, lg_t if lg_t.dtype == scale.dtype else ops.cast(lg_t, scale.dtype))
        return [_DirectGrad(producer, {0: ops.mul(dx, scale)}), None, None]
    return [_nll_probs_grad(ctx, op, g, False), None, None]

