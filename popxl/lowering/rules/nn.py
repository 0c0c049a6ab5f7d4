"""Neural-network ops composed from element-wise maps and reductions: softmax, the
normalisations and the negative log likelihood losses."""
from __future__ import annotations

import numpy as np

import ipu

from .. import blocks as B
from .. import layouts
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


def _channel_count(x) -> int:
    """Elements per channel of an (N, C, ...) tensor: what the batch statistics average over."""
    return x.numel // max(x.shape[1], 1)


@lowering_rule("batch_norm_training")
def batch_norm_training(ctx, op):
    """popnn's batchNormalise: the batch statistics from one pass of sums (x and x^2 reduced per
    channel; popnn's batchNormEstimates), then y = x a + b with a = scale / std and b = bias - mean a
    per channel (poplin's channelMul and addToChannel: two element-wise passes over x)."""
    x, scale, bias = (ctx.value(t) for t in op.inputs)
    et, r = x.dtype, x.rank
    axes = tuple(i for i in range(r) if i != 1)
    inv_count = B.scalar_constant(ctx, 1.0 / max(_channel_count(x), 1), et, "inv_count")
    s1 = B.reduce(ctx, x, axes, "sum", suffix="sum")
    s2 = B.reduce(ctx, x, axes, "sum_squares", suffix="sum_squares")
    mean = B.binary(ctx, "mul", s1, inv_count, suffix="mean")
    msq = B.binary(ctx, "mul", s2, inv_count, suffix="mean_square")
    var = B.binary(ctx, "sub", msq, B.binary(ctx, "mul", mean, mean, suffix="mean2"), suffix="var")
    std = B.unary(ctx, "sqrt", B.binary(ctx, "add", var, B.scalar_constant(ctx, op.attrs["epsilon"], et, "eps"),
                                        suffix="var_eps"), suffix="std")
    inv_std = B.binary(ctx, "div", B.scalar_constant(ctx, 1.0, et, "one"), std, shape=std.shape, suffix="inv_std")
    a = B.binary(ctx, "mul", scale, inv_std, suffix="factor")
    b = B.binary(ctx, "sub", bias, B.binary(ctx, "mul", mean, a, suffix="mean_factor"), suffix="shift_by")
    scaled = B.binary(ctx, "mul", x, _per_channel(a, r), shape=x.shape, suffix="scale")
    ctx.bind(op.outputs[0], B.binary(ctx, "add", scaled, _per_channel(b, r), shape=x.shape, suffix="shift"))
    ctx.bind(op.outputs[1], mean)
    ctx.bind(op.outputs[2], inv_std)


@lowering_rule("batch_norm_training_grad")
def batch_norm_training_grad(ctx, op):
    """popnn's batchNormGradients: per channel sum(g) (the bias gradient) and sum(g x), then the
    input gradient as one per-channel linear map of g and x: dx = k1 g + k2 x + k3 with
    k1 = scale s, k2 = -scale s^2 dscale / M, k3 = -k1 dbias / M - k2 mean (s the inverse standard
    deviation, M the elements per channel, dscale = s (sum(g x) - mean sum(g)))."""
    g, x, scale, mean, inv_std = (ctx.value(t) for t in op.inputs)
    et, r = x.dtype, x.rank
    if x.is_identity and g.shape == x.shape:
        # popnn's batchNormGradients lays its gradients out like the activations: g is brought into
        # x's layout once (no copy when it already is: a non-linearity's gradient is mapped so)
        g = ctx.like(g, x.variable)
    elif g.shape == x.shape and layouts.clone_source(ctx, [x], x.shape) is not None:
        g = layouts.like_view(ctx, g, x)  # the same for activations stored in their producer's order
    axes = tuple(i for i in range(r) if i != 1)
    inv_count = B.scalar_constant(ctx, 1.0 / max(_channel_count(x), 1), et, "inv_count")
    dbias = B.reduce(ctx, g, axes, "sum", suffix="sum_g")
    gx = B.binary(ctx, "mul", g, x, shape=x.shape, suffix="g_x")
    sgx = B.reduce(ctx, gx, axes, "sum", suffix="sum_g_x")
    dscale = B.binary(ctx, "mul", B.binary(ctx, "sub", sgx, B.binary(ctx, "mul", mean, dbias, suffix="mean_sum_g"),
                                           suffix="centred_sum"), inv_std, suffix="dscale")
    k1 = B.binary(ctx, "mul", scale, inv_std, suffix="k1")
    k2 = B.binary(ctx, "mul", B.binary(ctx, "mul", k1, inv_std, suffix="k1_s"),
                  B.binary(ctx, "mul", dscale, inv_count, suffix="dscale_m"), suffix="k2_neg")
    k3 = B.binary(ctx, "sub", B.binary(ctx, "mul", k2, mean, suffix="k2_mean"),
                  B.binary(ctx, "mul", k1, B.binary(ctx, "mul", dbias, inv_count, suffix="dbias_m"), suffix="k1_dbias"),
                  suffix="k3")  # k3 = -k2 mean - k1 dbias / M with k2 = -k2_neg
    t = B.binary(ctx, "mul", g, _per_channel(k1, r), shape=x.shape, suffix="k1_g")
    u = B.binary(ctx, "mul", x, _per_channel(k2, r), shape=x.shape, suffix="k2_x")
    v = B.binary(ctx, "sub", t, u, shape=x.shape, suffix="k1_g_k2_x")
    ctx.bind(op.outputs[0], B.binary(ctx, "add", v, _per_channel(k3, r), shape=x.shape, suffix="dx"))
    ctx.bind(op.outputs[1], dscale)
    ctx.bind(op.outputs[2], dbias)


@lowering_rule("nonlinearity_grad")
def nonlinearity_grad(ctx, op):
    from codelets.nonlinearity import GRAD_OPS
    g, t = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    a = op.attrs
    suffix = a["kind"] + "_grad"
    # popnn's nonLinearityInputGradient maps the input gradient like the forward output, not like
    # the incoming gradient, so that batch norm's backward pass finds its gradient and activations
    # on the same tiles (no exchange there)
    out = ctx.new_var(g.shape, g.dtype, ctx.name(suffix), like=t) if t.is_identity and t.shape == g.shape else None
    out = B.elementwise(ctx, "NonLinearityGrad", [g, t], ["outGrad", "out"], g.shape, g.dtype,
                        ip={"op": GRAD_OPS[a["kind"]]}, fp={"p0": a["p0"], "p1": a["p1"]}, out=out,
                        out_field="inGrad", suffix=suffix, layout_of=1)
    ctx.bind(op.outputs[0], out)


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
