"""Neural-network ATen ops: matrix products, convolution, pooling, normalisations, softmax,
dropout, attention and the losses PyTorch's functional losses lower to."""
from __future__ import annotations

import math

import numpy as np

import popxl
import popxl.ops as ops

from .context import Op, aten
from .elementwise import add_scalar, mul_scalar, scalar_like


# -- matrix products ----------------------------------------------------------------------------------------------

def _amp(op: Op):
    """The available memory proportion of this op: set_available_memory on its result, else the
    IPU's Options.setAvailableMemoryProportion value, else the planner's default."""
    amp = op.attr("available_memory_proportion")
    if amp is None and op.tr.options is not None:
        amp = op.tr.options.get("available_memory", {}).get(op.node.ipu)
    return amp


def _partials(op: Op):
    if op.tr.options is not None and op.tr.options.get("partials_half"):
        return popxl.float16
    return None


def matmul(op: Op, a: popxl.Tensor, b: popxl.Tensor) -> popxl.Tensor:
    """a @ b with the node's available memory proportion, partials type and serialisation."""
    ser = op.attr("serialization")
    amp, partials = _amp(op), _partials(op)
    if partials is not None and a.dtype != popxl.float16:
        partials = None

    def mm(x, y):
        return ops.matmul(x, y, available_memory_proportion=amp, partials_type=partials)

    if ser is None or ser[0] == "none" or int(ser[1]) <= 1:
        return mm(a, b)
    mode, factor = ser[0], int(ser[1])
    if mode == "input_channels":  # split the rows of a
        axis, n = a.rank - 2, a.shape[-2]
        if n % factor:
            raise op.error(f"serializedMatMul: factor {factor} does not divide the input channels ({n})")
        parts = [mm(p, b) for p in ops.split(a, [n // factor] * factor, axis)]
        return ops.concat(parts, parts[0].rank - 2)
    if mode == "output_channels":  # split the columns of b
        axis, n = b.rank - 1, b.shape[-1]
        if n % factor:
            raise op.error(f"serializedMatMul: factor {factor} does not divide the output channels ({n})")
        parts = [mm(a, p) for p in ops.split(b, [n // factor] * factor, axis)]
        return ops.concat(parts, parts[0].rank - 1)
    if mode == "reducing_dim":  # split k, sum the partial products
        k = a.shape[-1]
        if k % factor:
            raise op.error(f"serializedMatMul: factor {factor} does not divide the reducing dimension ({k})")
        pa = ops.split(a, [k // factor] * factor, a.rank - 1)
        pb = ops.split(b, [k // factor] * factor, b.rank - 2)
        keep = ser[2] if len(ser) > 2 else False
        acc = None
        for x, y in zip(pa, pb):
            p = mm(x, y)
            if keep and p.dtype == popxl.float16:
                p = ops.cast(p, popxl.float32)
            acc = p if acc is None else ops.add(acc, p)
        return ops.cast(acc, a.dtype) if acc.dtype != a.dtype else acc
    raise op.error(f"serializedMatMul: unknown mode {mode!r}")


@aten("mm", "bmm", "dot", "mv")
def mm(op: Op):
    dt = op.out_dtype()
    return matmul(op, op.t("self", dt), op.t("mat2" if op.has("mat2") else "other" if op.has("other") else "vec"
                                             if op.has("vec") else "tensor", dt))


@aten("addmm", "baddbmm", "addmv", "addbmm")
def addmm(op: Op):
    dt = op.out_dtype()
    names = {"aten::addmm": ("mat1", "mat2"), "aten::baddbmm": ("batch1", "batch2"), "aten::addmv": ("mat", "vec"),
             "aten::addbmm": ("batch1", "batch2")}[op.node.packet]
    y = matmul(op, op.t(names[0], dt), op.t(names[1], dt))
    if op.node.packet == "aten::addbmm":
        y = ops.sum(y, axis=[0])
    y = mul_scalar(y, op.arg("alpha", 1))
    beta = op.arg("beta", 1)
    if float(beta) == 0.0:
        return y
    return ops.add(mul_scalar(op.t("self", dt), beta), y)


# -- convolution and pooling ---------------------------------------------------------------------------------------

def _spatial(v, n):
    v = list(v) if isinstance(v, (list, tuple)) else [v]
    return tuple(int(x) for x in (v * n if len(v) == 1 else v))


@aten("convolution")
def convolution(op: Op):
    """aten::convolution with its groups argument (grouped and depthwise convolutions are planned by
    the lowering of popxl's conv)."""
    dt = op.out_dtype()
    x, w = op.t("input", dt), op.t("weight", dt)
    n = x.rank - 2
    stride, pad, dil = _spatial(op.arg("stride", 1), n), _spatial(op.arg("padding", 0), n), \
        _spatial(op.arg("dilation", 1), n)
    if isinstance(op.arg("padding"), str):
        raise op.error("string padding ('same' / 'valid') reaches aten::convolution as numbers; got a string")
    groups = int(op.arg("groups", 1))
    amp = _amp(op)
    kwargs = {}
    if amp is not None:
        kwargs["available_memory_proportions"] = [amp]
    if op.arg("transposed", False):
        out_pad = _spatial(op.arg("output_padding", 0), n)
        y = ops.conv_transpose(x, w, stride=stride, padding=pad + pad, dilation=dil, groups=groups,
                               output_padding=out_pad, **kwargs)
    else:
        y = ops.conv(x, w, stride=stride, padding=pad + pad, dilation=dil, groups=groups, **kwargs)
    if op.has("bias"):
        b = op.t("bias", dt)
        y = ops.add(y, ops.reshape(b, (1, b.shape[0]) + (1,) * n))
    return y


def _pool_args(op: Op, n):
    k = _spatial(op.arg("kernel_size"), n)
    s = op.arg("stride")
    s = k if not s else _spatial(s, n)
    p = _spatial(op.arg("padding", 0), n)
    return k, s, p


@aten("max_pool2d_with_indices", "max_pool3d_with_indices")
def max_pool(op: Op):
    x = op.t("self")
    n = x.rank - 2
    if n < 1:
        raise op.error("max pooling needs a batch and channel axis")
    k, s, p = _pool_args(op, n)
    y = ops.max_pool(x, kernel_size=k, stride=s, padding=p + p, dilation=_spatial(op.arg("dilation", 1), n),
                     ceil_mode=bool(op.arg("ceil_mode", False)))
    return [y, None] if len(op.node.outputs) > 1 else y


@aten("avg_pool2d", "avg_pool3d")
def avg_pool(op: Op):
    """PyTorch divides by the whole window, padding included (count_include_pad, its default), or
    by divisor_override; popxl's pool divides by the elements inside the input."""
    x = op.t("self")
    n = x.rank - 2
    k, s, p = _pool_args(op, n)
    ceil_mode = bool(op.arg("ceil_mode", False))
    include_pad = bool(op.arg("count_include_pad", True))
    divisor = op.arg("divisor_override")
    if any(p) and include_pad:
        # pad with zeros explicitly: then every window counts the padding
        for i in range(n):
            if p[i]:
                d = 2 + i
                shape = list(x.shape)
                shape[d] = p[i]
                z = popxl.constant(np.zeros(shape, x.dtype.as_numpy()), x.dtype, name="pool_pad")
                x = ops.concat([z, x, z], d)
        p = (0,) * n
    y = ops.average_pool(x, kernel_size=k, stride=s, padding=p + p, ceil_mode=ceil_mode)
    if divisor is not None:
        y = mul_scalar(y, float(np.prod(k)) / float(divisor))
    return y


def _adaptive_windows(size, out):
    return [(int(math.floor(i * size / out)), int(math.ceil((i + 1) * size / out))) for i in range(out)]


def _adaptive(op: Op, reduce_fn, pool_fn):
    x = op.t("self")
    out_size = _spatial(op.arg("output_size"), x.rank - 2)
    n = len(out_size)
    ins = tuple(x.shape[2:])
    if all(o == 1 for o in out_size):
        return reduce_fn(x, axis=list(range(2, 2 + n)), keepdims=True)
    if all(i % o == 0 for i, o in zip(ins, out_size)):
        k = tuple(i // o for i, o in zip(ins, out_size))
        return pool_fn(x, kernel_size=k, stride=k, padding=(0,) * (2 * n))
    # uneven windows: each output cell reduces its own window (PyTorch's floor / ceil bounds)
    y = x
    for axis in range(n):
        d = 2 + axis
        parts = [reduce_fn(ops.slice(y, start=[a], stop=[b], axis=[d]), axis=[d], keepdims=True)
                 for a, b in _adaptive_windows(y.shape[d], out_size[axis])]
        y = parts[0] if len(parts) == 1 else ops.concat(parts, d)
    return y


@aten("_adaptive_avg_pool2d", "_adaptive_avg_pool3d")
def adaptive_avg_pool(op: Op):
    return _adaptive(op, ops.mean, ops.average_pool)


@aten("adaptive_max_pool2d", "adaptive_max_pool3d")
def adaptive_max_pool(op: Op):
    return [_adaptive(op, ops.max, ops.max_pool), None]


@aten("upsample_nearest2d", "upsample_nearest1d", "upsample_nearest3d")
def upsample_nearest(op: Op):
    x = op.t("self")
    out = op.out_shape()
    scales = tuple(o / i for o, i in zip(out, x.shape))
    return ops.interpolate(x, scale_factor=scales, mode="nearest", nearest_mode="floor",
                           coordinate_transformation_mode="asymmetric")


# -- normalisation ------------------------------------------------------------------------------------------------

def _affine(op: Op, name: str, n: int, value: float, dt) -> popxl.Tensor:
    if op.has(name):
        return op.t(name, dt)
    return popxl.constant(np.full((n,), value, dt.as_numpy()), dt)


def _batch_norm(op: Op, training: bool, momentum, eps, stats_in_place: bool):
    dt = op.out_dtype()
    x = op.t("input", dt)
    c = x.shape[1]
    w, b = _affine(op, "weight", c, 1.0, dt), _affine(op, "bias", c, 0.0, dt)
    shape = (1, c) + (1,) * (x.rank - 2)
    if not training:
        rm, rv = op.t("running_mean", dt), op.t("running_var", dt)
        inv = ops.reciprocal(ops.sqrt(add_scalar(rv, eps)))
        y = ops.add(ops.mul(ops.sub(x, ops.reshape(rm, shape)), ops.reshape(ops.mul(inv, w), shape)),
                    ops.reshape(b, shape))
        return [y, None, None]
    axes = [0] + list(range(2, x.rank))
    count = int(np.prod([x.shape[a] for a in axes]))
    mean = ops.mean(x, axis=axes, keepdims=True)
    centred = ops.sub(x, mean)
    var = ops.mean(ops.mul(centred, centred), axis=axes, keepdims=True)
    inv = ops.reciprocal(ops.sqrt(add_scalar(var, eps)))
    y = ops.add(ops.mul(ops.mul(centred, inv), ops.reshape(w, shape)), ops.reshape(b, shape))
    outs = [y, ops.reshape(mean, (c,)), ops.reshape(inv, (c,))]
    if op.has("running_mean") and momentum is not None and stats_in_place:
        m = float(momentum)
        rm, rv = op.t("running_mean"), op.t("running_var")
        bm = ops.detach(ops.reshape(mean, (c,)))
        bv = ops.detach(ops.reshape(var, (c,)))
        unbiased = mul_scalar(bv, count / max(count - 1, 1))  # the running variance is unbiased (PyTorch)
        new_rm = ops.add(mul_scalar(rm, 1 - m), mul_scalar(ops.cast(bm, rm.dtype) if bm.dtype != rm.dtype else bm, m))
        new_rv = ops.add(mul_scalar(rv, 1 - m),
                         mul_scalar(ops.cast(unbiased, rv.dtype) if unbiased.dtype != rv.dtype else unbiased, m))
        outs += [new_rm, new_rv]
    return outs


@aten("native_batch_norm")
def native_batch_norm(op: Op):
    return _batch_norm(op, bool(op.arg("training")), op.arg("momentum"), float(op.arg("eps")),
                       stats_in_place=op.attr("updates_running_stats", False))


@aten("native_layer_norm")
def native_layer_norm(op: Op):
    dt = op.out_dtype()
    x = op.t("input", dt)
    norm = tuple(op.arg("normalized_shape"))
    n = int(np.prod(norm))
    lead = int(np.prod(x.shape[:x.rank - len(norm)]))
    w = ops.reshape(op.t("weight", dt), (n,)) if op.has("weight") else popxl.constant(np.ones(n, dt.as_numpy()), dt)
    b = ops.reshape(op.t("bias", dt), (n,)) if op.has("bias") else popxl.constant(np.zeros(n, dt.as_numpy()), dt)
    y = ops.layer_norm(ops.reshape(x, (lead, n)), w, b, eps=float(op.arg("eps")))
    return [ops.reshape(y, x.shape), None, None]


@aten("native_group_norm")
def native_group_norm(op: Op):
    dt = op.out_dtype()
    x = op.t("input", dt)
    c = x.shape[1]
    w, b = _affine(op, "weight", c, 1.0, dt), _affine(op, "bias", c, 0.0, dt)
    xr = x if x.rank > 2 else ops.reshape(x, tuple(x.shape) + (1,))
    y = ops.group_norm(xr, w, b, num_groups=int(op.arg("group")), eps=float(op.arg("eps")))
    return [ops.reshape(y, x.shape) if y.rank != x.rank else y, None, None]


# -- softmax, dropout, attention ------------------------------------------------------------------------------------

@aten("_softmax")
def softmax(op: Op):
    x = op.t("self", op.out_dtype())
    if x.rank == 0:
        return popxl.constant(np.ones((), x.dtype.as_numpy()), x.dtype)
    return ops.softmax(x, op.arg("dim"))


@aten("_safe_softmax")
def safe_softmax(op: Op):
    """softmax, with 0 for rows that are -inf everywhere (attention rows that mask every key)."""
    x = op.t("self", op.out_dtype())
    d = op.arg("dim")
    d = d + x.rank if d < 0 else d
    y = ops.softmax(x, d)
    finite = ops.cast(ops.logical_not(ops.isinf(x)), popxl.int32)
    any_finite = ops.greater(ops.max(finite, axis=[d], keepdims=True), popxl.constant(np.int32(0)))
    return ops.where(any_finite, y, scalar_like(0.0, y))


def log_softmax_of(x: popxl.Tensor, dim: int) -> popxl.Tensor:
    return ops.sub(x, ops.logsumexp(x, axis=[dim], keepdims=True))


@aten("_log_softmax")
def log_softmax(op: Op):
    x = op.t("self", op.out_dtype())
    if x.rank == 0:
        return popxl.constant(np.zeros((), x.dtype.as_numpy()), x.dtype)
    d = op.arg("dim")
    return log_softmax_of(x, d + x.rank if d < 0 else d)


@aten("native_dropout")
def dropout(op: Op):
    x = op.t("input")
    p = float(op.arg("p"))
    train = op.arg("train", True)
    if not train or p == 0.0 or not op.tr.training:
        y = ops.identity(x)
    else:
        y = ops.dropout(x, op.tr.next_seed(), p)
    return [y, None] if len(op.node.outputs) > 1 else y


def attention(op: Op, q, k, v, mask, dropout_p: float, causal: bool, scale):
    dt = q.dtype
    e = q.shape[-1]
    scale = 1.0 / math.sqrt(e) if scale is None else float(scale)
    kt = ops.transpose(k, list(range(k.rank - 2)) + [k.rank - 1, k.rank - 2])
    s = mul_scalar(matmul(op, q, kt), scale)
    lq, lk = q.shape[-2], k.shape[-2]
    if causal:
        keep = np.tril(np.ones((lq, lk), bool))
        s = ops.where(popxl.constant(keep, popxl.bool), s, scalar_like(-np.inf if dt == popxl.float32 else -65504, s))
    if mask is not None:
        if mask.dtype == popxl.bool:
            s = ops.where(mask, s, scalar_like(-np.inf if dt == popxl.float32 else -65504, s))
        else:
            s = ops.add(s, mask if mask.dtype == dt else ops.cast(mask, dt))
    p = ops.softmax(s, s.rank - 1)
    if dropout_p > 0.0 and op.tr.training:
        p = ops.dropout(p, op.tr.next_seed(), dropout_p)
    return matmul(op, p, v), p


@aten("_scaled_dot_product_flash_attention_for_cpu")
def scaled_dot_product_attention(op: Op):
    dt = op.out_dtype()
    q, k, v = op.t("query", dt), op.t("key", dt), op.t("value", dt)
    mask = op.t("attn_mask") if op.has("attn_mask") else (op.t("attn_bias") if op.has("attn_bias") else None)
    out, probs = attention(op, q, k, v, mask, float(op.arg("dropout_p", 0.0)), bool(op.arg("is_causal", False)),
                           op.arg("scale"))
    outs = [out] + [None] * (len(op.node.outputs) - 1)
    if op.node.packet == "aten::_scaled_dot_product_attention_math" and len(outs) > 1:
        outs[1] = probs
    return outs


# -- losses ---------------------------------------------------------------------------------------------------------

def reduce_loss(per: popxl.Tensor, reduction: int) -> popxl.Tensor:
    """ATen's reduction enum: 0 none, 1 mean, 2 sum."""
    if reduction == 0:
        return per
    if per.rank == 0:
        return ops.identity(per)
    return ops.mean(per) if reduction == 1 else ops.sum(per)


@aten("nll_loss_forward", "nll_loss2d_forward")
def nll_loss(op: Op):
    dt = op.out_dtype()
    x = op.t("self", dt)
    target = op.t("target", popxl.int32)
    reduction = int(op.arg("reduction", 1))
    ignore = int(op.arg("ignore_index", -100))
    if x.rank == 1:  # one sample: (C) and a scalar target
        x = ops.reshape(x, (1, x.shape[0]))
        target = ops.reshape(target, (1,))
    elif x.rank > 2:  # (N, C, d1, ...): classes last for the IPU's nll
        x = ops.transpose(x, [0] + list(range(2, x.rank)) + [1])
    red = {0: "none", 1: "mean", 2: "sum"}[reduction]
    if not op.has("weight"):
        loss = ops.nll_loss(x, target, ignore_index=ignore, reduction=red, log_prob=True)
    else:  # class weights: -w[t] x[t], mean divided by the total weight of the counted samples
        w = op.t("weight", dt)
        c = x.shape[-1]
        flat_x = ops.reshape(x, (int(np.prod(x.shape[:-1])), c))
        flat_t = ops.reshape(target, (flat_x.shape[0],))
        valid = ops.not_equal(flat_t, scalar_like(ignore, flat_t))
        safe_t = ops.where(valid, flat_t, scalar_like(0, flat_t))
        rows = popxl.constant((np.arange(flat_x.shape[0]) * c).astype(np.int32))
        picked = ops.gather(ops.reshape(flat_x, (flat_x.shape[0] * c,)), ops.add(rows, safe_t), axis=0)
        wt = ops.where(valid, ops.gather(w, safe_t, axis=0), scalar_like(0.0, picked))
        per = ops.negate(ops.mul(picked, wt))
        if red == "none":
            loss = ops.reshape(per, tuple(target.shape))
        elif red == "sum":
            loss = ops.sum(per)
        else:
            loss = ops.div(ops.sum(per), ops.sum(wt))
    if loss.rank and tuple(loss.shape) != op.out_shape(0):
        loss = ops.reshape(loss, op.out_shape(0))
    return [loss, None]


@aten("mse_loss")
def mse_loss(op: Op):
    dt = op.out_dtype()
    d = ops.sub(op.t("self", dt), op.t("target", dt))
    return reduce_loss(ops.mul(d, d), int(op.arg("reduction", 1)))


@aten("smooth_l1_loss", "huber_loss")
def smooth_l1_loss(op: Op):
    dt = op.out_dtype()
    d = ops.abs(ops.sub(op.t("self", dt), op.t("target", dt)))
    huber = op.node.packet == "aten::huber_loss"
    beta = float(op.arg("delta", 1.0) if huber else op.arg("beta", 1.0))
    if beta == 0.0:
        return reduce_loss(d, int(op.arg("reduction", 1)))
    quad = mul_scalar(ops.mul(d, d), 0.5 if huber else 0.5 / beta)
    lin = add_scalar(mul_scalar(d, beta), -0.5 * beta * beta) if huber else add_scalar(d, -0.5 * beta)
    per = ops.where(ops.less(d, scalar_like(beta, d)), quad, lin)
    return reduce_loss(per, int(op.arg("reduction", 1)))


@aten("binary_cross_entropy")
def binary_cross_entropy(op: Op):
    """-(y log x + (1 - y) log(1 - x)), each log clamped at -100 as in PyTorch."""
    dt = op.out_dtype()
    x, y = op.t("self", dt), op.t("target", dt)
    lx = ops.maximum(ops.log(x), scalar_like(-100.0, x))
    l1x = ops.maximum(ops.log(ops.sub(scalar_like(1.0, x), x)), scalar_like(-100.0, x))
    per = ops.negate(ops.add(ops.mul(y, lx), ops.mul(ops.sub(scalar_like(1.0, y), y), l1x)))
    if op.has("weight"):
        per = ops.mul(per, op.t("weight", dt))
    return reduce_loss(per, int(op.arg("reduction", 1)))


@aten("soft_margin_loss")
def soft_margin_loss(op: Op):
    dt = op.out_dtype()
    z = ops.negate(ops.mul(op.t("self", dt), op.t("target", dt)))
    per = ops.add(ops.relu(z), ops.log(add_scalar(ops.exp(ops.negate(ops.abs(z))), 1.0)))
    return reduce_loss(per, int(op.arg("reduction", 1)))
