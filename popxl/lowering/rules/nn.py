"""Neural-network ops composed from element-wise maps and reductions: softmax, the
normalisations and the negative log likelihood losses."""
from __future__ import annotations

import numpy as np

import ipu

from .. import blocks as B
from ..registry import lowering_rule


def softmax_view(ctx, x, axis):
    m = B.reduce(ctx, x, (axis,), "max", keepdims=True, suffix="max")
    e = B.unary(ctx, "exp", B.binary(ctx, "sub", x, m, shape=x.shape, suffix="shift"), suffix="exp")
    s = B.reduce(ctx, e, (axis,), "sum", keepdims=True, suffix="sum")
    return B.binary(ctx, "div", e, s, shape=x.shape, suffix="normalise")


@lowering_rule("softmax")
def softmax(ctx, op):
    x = ctx.value(op.inputs[0])
    ctx.bind(op.outputs[0], softmax_view(ctx, x, op.attrs["axis"] % x.rank))


def _per_channel(v, rank):
    """A per-channel (C,) tensor shaped to broadcast along axis 1 of a rank-`rank` tensor."""
    return v.reshape((1, v.numel) + (1,) * (rank - 2)) if rank >= 2 else v


@lowering_rule("group_norm")
def group_norm(ctx, op):
    x, w, b = (ctx.value(t) for t in op.inputs)
    groups = op.attrs["num_groups"]
    eps = op.attrs["epsilon"]
    n = x.shape[0]
    k = int(np.prod(x.shape[1:], dtype=np.int64)) // groups  # from the shape: n may be 0
    g = x.reshape(n, groups, k)
    et = x.dtype
    mean = B.reduce(ctx, g, (2,), "sum", keepdims=True, suffix="sum")
    mean = B.binary(ctx, "mul", mean, B.scalar_constant(ctx, 1.0 / k, et, "inv_k"), suffix="mean")
    centred = B.binary(ctx, "sub", g, mean, shape=g.shape, suffix="centre")
    var = B.reduce(ctx, centred, (2,), "sum_squares", keepdims=True, suffix="sumsq")
    var = B.binary(ctx, "mul", var, B.scalar_constant(ctx, 1.0 / k, et, "inv_k2"), suffix="var")
    var_eps = B.binary(ctx, "add", var, B.scalar_constant(ctx, eps, et, "eps"), suffix="var_eps")
    inv_std = B.binary(ctx, "div", B.scalar_constant(ctx, 1.0, et, "one"), B.unary(ctx, "sqrt", var_eps),
                       shape=var_eps.shape, suffix="inv_std")
    normed = B.binary(ctx, "mul", centred, inv_std, shape=g.shape, suffix="normalise").reshape(x.shape)
    scaled = B.binary(ctx, "mul", normed, _per_channel(w, x.rank), shape=x.shape, suffix="scale")
    out = B.binary(ctx, "add", scaled, _per_channel(b, x.rank), shape=x.shape, suffix="shift")
    ctx.bind(op.outputs[0], out)
    ctx.bind(op.outputs[1], mean.reshape(n * groups))
    ctx.bind(op.outputs[2], inv_std.reshape(n * groups))


@lowering_rule("batch_norm_inference")
def batch_norm_inference(ctx, op):
    x, scale, bias, mean, var = (ctx.value(t) for t in op.inputs)
    et = x.dtype
    r = x.rank
    var_eps = B.binary(ctx, "add", var, B.scalar_constant(ctx, op.attrs["epsilon"], et, "eps"), suffix="var_eps")
    factor = B.binary(ctx, "div", scale, B.unary(ctx, "sqrt", var_eps), suffix="factor")
    centred = B.binary(ctx, "sub", x, _per_channel(mean, r), shape=x.shape, suffix="centre")
    scaled = B.binary(ctx, "mul", centred, _per_channel(factor, r), shape=x.shape, suffix="scale")
    ctx.bind(op.outputs[0], B.binary(ctx, "add", scaled, _per_channel(bias, r), shape=x.shape, suffix="shift"))


def _onehot_mask(ctx, labels, classes, et):
    """mask[..., c] = (labels[...] == c) as `et`, shape labels.shape + (classes,)."""
    iota = ctx.g.add_constant(ctx.name("classes"), np.arange(classes, dtype=labels.dtype.numpy), labels.dtype)
    ctx.tiles.map(ctx.g, iota)
    shape = tuple(labels.shape) + (classes,)
    eq = B.binary(ctx, "equal", labels.reshape(tuple(labels.shape) + (1,)), iota, shape=shape, et=ipu.BOOL,
                  suffix="onehot")
    return B.elementwise(ctx, "Cast", [eq], ["in"], shape, et, suffix="onehot_cast")


def _valid_mask(ctx, labels, ignore_index, et):
    """1 where labels != ignore_index, else 0 (as `et`), or None when nothing is ignored."""
    if ignore_index is None:
        return None
    ig = B.scalar_constant(ctx, ignore_index, labels.dtype, "ignore_index")
    ne = B.binary(ctx, "not_equal", labels, ig, shape=labels.shape, et=ipu.BOOL, suffix="valid")
    return B.elementwise(ctx, "Cast", [ne], ["in"], labels.shape, et, suffix="valid_cast")


def _reduce_loss(ctx, per_sample, valid, reduction, et):
    if reduction == "none":
        return per_sample
    axes = tuple(range(per_sample.rank))
    total = B.reduce(ctx, per_sample, axes, "sum", suffix="loss_sum")
    if reduction == "sum":
        return total
    if valid is not None:
        count = B.reduce(ctx, valid, axes, "sum", suffix="count")
        return B.binary(ctx, "div", total, count, suffix="loss_mean")
    return B.binary(ctx, "mul", total, B.scalar_constant(ctx, 1.0 / max(per_sample.numel, 1), et, "inv_n"),
                    suffix="loss_mean")


# PopART's NllOpx / NllGradOpx (willow/src/popx/op/nllx.cpp): the floor under a probability before its
# log (forward) and before dividing by it (gradient), [float32, float16]
NLL_LOG_EPS = (1.0e-7, 6.104e-05)
NLL_GRAD_EPS = (1.0e-10, 6.104e-05)


def _nll(ctx, op, probs, labels):
    et = probs.dtype
    classes = probs.shape[-1]
    labels = labels.reshape(tuple(probs.shape[:-1]))  # (N, 1) labels of (N, C) probs, as PopART flattens
    mask = _onehot_mask(ctx, labels, classes, et)
    picked = B.reduce(ctx, B.binary(ctx, "mul", probs, mask, suffix="pick"), (probs.rank - 1,), "sum",
                      suffix="picked")
    valid = _valid_mask(ctx, labels, op.attrs.get("ignore_index"), et)
    if not op.attrs.get("log_prob", False):
        # PopART's NllOpx: log(max(p, eps)), eps 1e-7 (6.104e-5 for float16, above its underflow), so a
        # probability that underflowed to 0 gives a large finite loss, not inf; ignored samples (which
        # pick 0) stay finite until the mask zeroes them
        eps = B.scalar_constant(ctx, NLL_LOG_EPS[et == ipu.FLOAT16], et, "eps")
        picked = B.binary(ctx, "max", picked, eps, shape=picked.shape, suffix="safe")
        picked = B.unary(ctx, "log", picked, suffix="log")
    per_sample = B.unary(ctx, "negate", picked, suffix="nll")
    if valid is not None:
        per_sample = B.binary(ctx, "mul", per_sample, valid, suffix="ignore")
    return per_sample, mask, valid


@lowering_rule("nll_loss")
def nll_loss(ctx, op):
    probs, labels = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    per_sample, _, valid = _nll(ctx, op, probs, labels)
    loss = _reduce_loss(ctx, per_sample, valid, op.attrs["reduction"], probs.dtype)
    ctx.bind(op.outputs[0], loss.reshape(tuple(op.outputs[0].shape)))


@lowering_rule("nll_loss_with_softmax_grad")
def nll_loss_with_softmax_grad(ctx, op):
    probs, labels, loss_grad = (ctx.value(t) for t in op.inputs)
    et = probs.dtype
    per_sample, mask, valid = _nll(ctx, op, probs, labels)
    reduction = op.attrs["reduction"]
    loss = _reduce_loss(ctx, per_sample, valid, reduction, et)
    # d loss / d logits = (probs - onehot) * loss_grad [/ count for mean], zero on ignored samples
    grad = B.binary(ctx, "sub", probs, mask, suffix="dx")
    scale = loss_grad.reshape(())
    if scale.dtype != et:  # a float32 loss_grad of float16 probs
        scale = B.elementwise(ctx, "Cast", [scale], ["in"], (), et, suffix="loss_grad_cast")
    if reduction == "mean":
        if valid is not None:
            count = B.reduce(ctx, valid, tuple(range(valid.rank)), "sum", suffix="grad_count")
            scale = B.binary(ctx, "div", scale, count, suffix="grad_scale")
        else:
            n = max(per_sample.numel, 1)
            scale = B.binary(ctx, "mul", scale, B.scalar_constant(ctx, 1.0 / n, et, "inv_n"), suffix="grad_scale")
    grad = B.binary(ctx, "mul", grad, scale, shape=probs.shape, suffix="dx_scale")
    if valid is not None:
        grad = B.binary(ctx, "mul", grad, valid.reshape(tuple(valid.shape) + (1,)), shape=probs.shape,
                        suffix="dx_ignore")
    ctx.bind(op.outputs[0], loss.reshape(tuple(op.outputs[0].shape)))
    ctx.bind(op.outputs[1], grad)
