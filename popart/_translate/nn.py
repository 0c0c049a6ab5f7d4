"""Neural-network ONNX ops: MatMul, Gemm, Conv, pools, normalisations, Softmax, Dropout, reductions,
LRN, RoiAlign, the random generators, and Graphcore's losses (Nll, L1, IdentityLoss). The recurrent
ops (LSTM, GRU, RNN) are in recurrent.py."""
from __future__ import annotations

import numpy as np

import popxl
import popxl.ops as ops

from .context import GRAPHCORE, onnx_op
from .elementwise import _scalar

# ReductionType values (PopART's enum): Sum = 0, Mean = 1, NoReduction = 2
_REDUCTION = {0: "sum", 1: "mean", 2: "none"}


@onnx_op("MatMul")
def matmul(node):
    return ops.matmul(node.input(0), node.input(1))


@onnx_op("Gemm", attrs=("alpha", "beta", "transA", "transB", "broadcast"))
def gemm(node):
    a, b = node.input(0), node.input(1)
    if int(node.attr("transA", 0)):
        a = ops.transpose(a)
    if int(node.attr("transB", 0)):
        b = ops.transpose(b)
    y = ops.matmul(a, b)
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    if alpha != 1.0:
        y = ops.mul(y, _scalar(alpha, y))
    if node.has_input(2) and beta != 0.0:
        c = node.input(2)
        if beta != 1.0:
            c = ops.mul(c, _scalar(beta, c))
        y = ops.add(y, c)
    return y


def _spatial(node, rank, name, default):
    v = node.attr(name)
    return tuple(int(x) for x in v) if v else (default,) * rank


def _pad_type(node):
    ap = node.attr("auto_pad", "NOTSET") or "NOTSET"
    return {"NOTSET": "not_set", "SAME_UPPER": "same_upper", "SAME_LOWER": "same_lower", "VALID": "valid"}[ap]


@onnx_op("Conv", attrs=("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
def conv(node):
    x, w = node.input(0), node.input(1)
    r = x.rank - 2
    kernel = node.attr("kernel_shape")
    if kernel and tuple(kernel) != tuple(w.shape[2:]):
        raise node.error(f"kernel_shape {list(kernel)} differs from the weights' spatial shape {list(w.shape[2:])}")
    y = ops.conv(x, w, stride=_spatial(node, r, "strides", 1), padding=_spatial(node, 2 * r, "pads", 0),
                 dilation=_spatial(node, r, "dilations", 1), groups=int(node.attr("group", 1)),
                 pad_type=_pad_type(node))
    if node.has_input(2):
        b = node.input(2)
        y = ops.add(y, ops.reshape(b, (1, b.shape[0]) + (1,) * r))
    return y


@onnx_op("ConvTranspose", attrs=("auto_pad", "dilations", "group", "kernel_shape", "output_padding",
                                 "output_shape", "pads", "strides"))
def conv_transpose(node):
    x, w = node.input(0), node.input(1)
    r = x.rank - 2
    y = ops.conv_transpose(x, w, stride=_spatial(node, r, "strides", 1), padding=_spatial(node, 2 * r, "pads", 0),
                           dilation=_spatial(node, r, "dilations", 1), groups=int(node.attr("group", 1)),
                           pad_type=_pad_type(node), output_padding=tuple(node.attr("output_padding") or ()),
                           output_shape=tuple(node.attr("output_shape") or ()))
    if node.has_input(2):
        b = node.input(2)
        y = ops.add(y, ops.reshape(b, (1, b.shape[0]) + (1,) * r))
    return y


@onnx_op("Upsample", "Resize", attrs=("mode", "scales", "coordinate_transformation_mode", "nearest_mode",
                                      "cubic_coeff_a", "exclude_outside", "extrapolation_value", "antialias",
                                      "keep_aspect_ratio_policy", "axes"))
def resize(node):
    """Upsample (scales attribute, opset < 9, or input 1) and Resize (scales input 2 or sizes input
    3), as PopART's UpsampleOp / ResizeOp (op/upsample.cpp, op/resize.cpp, popx/op/resizex.cpp):
    Upsample is nearest only; Resize-10 indexes nearest neighbours by floor(i / scale); Resize-11
    and later take the modes nearest, linear and cubic (Keys' kernel with a = -0.75, whatever
    cubic_coeff_a says, as PopART) and every coordinate transformation mode but
    tf_crop_and_resize; exclude_outside must be 0. An output length given by `sizes` is that
    length (the scale is the nearest float32 whose product with the input length reaches it)."""
    x = node.input(0)
    mode = node.attr("mode", "nearest") or "nearest"
    if node.op_type == "Upsample":
        if mode != "nearest":
            raise node.error(f"Upsample op only supports the mode 'nearest' at this time (mode {mode!r}; PopART's "
                             f"UpsampleOp). Export with a Resize (opset 11 or later) for linear or cubic modes")
        scales = node.attr("scales") if node.has_attr("scales") else node.const(1, "scales")
        scales = _full_rank_scales(node, np.asarray(scales, np.float32).reshape(-1), x.rank, None)
        return ops.interpolate(x, scales, mode="nearest", nearest_mode="floor",
                               coordinate_transformation_mode="asymmetric")
    if mode not in ("nearest", "linear", "cubic"):
        raise node.error(f"Unrecognised resize mode {mode!r} (PopART's Resize takes 'nearest', 'linear' or 'cubic')")
    if int(node.attr("exclude_outside", 0) or 0) != 0:
        raise node.error(f"Unsupported value '{node.attr('exclude_outside')}' for attribute 'exclude_outside'. "
                         f"Acceptable values are [0] (PopART's Resize)")
    if int(node.attr("antialias", 0) or 0) != 0:
        raise node.error("antialias=1 (Resize-18) is not supported: PopART's Resize has no anti-aliasing filter")
    axes = [int(a) % x.rank for a in node.attr("axes")] if node.has_attr("axes") else None
    scales = np.asarray(node.const(2, "scales"), np.float32).reshape(-1) if node.version >= 11 and \
        node.has_input(2) else np.zeros(0, np.float32)
    if node.version < 11:
        scales = np.asarray(node.const(1, "scales"), np.float32).reshape(-1)
    sizes = np.asarray(node.const(3, "sizes")).reshape(-1) if node.version >= 11 and node.has_input(3) else None
    if scales.size and sizes is not None and sizes.size:
        raise node.error("Resize op has inputs for `sizes` and `scales`. Only one of these tensors should be present")
    if scales.size:
        scales = _full_rank_scales(node, scales, x.rank, axes)
    elif sizes is not None and sizes.size:
        scales = _scales_of_sizes(node, x.shape, sizes, axes)
    else:
        raise node.error("Resize op has no input for `size` or `scales`. One of these tensors needs to be present")
    if node.version < 11:  # Resize-10: PopART's nearest mode 'pytorch', the index floor(i / scale)
        return ops.interpolate(x, scales, mode=mode, nearest_mode="floor", coordinate_transformation_mode="asymmetric")
    ctm = node.attr("coordinate_transformation_mode", "half_pixel") or "half_pixel"
    nearest = node.attr("nearest_mode", "round_prefer_floor") or "round_prefer_floor"
    return ops.interpolate(x, scales, mode=mode, nearest_mode=nearest, coordinate_transformation_mode=ctm)


def _full_rank_scales(node, scales, rank, axes):
    """One float32 scale per axis of the input (Resize-18's `axes` names the axes `scales` covers)."""
    if axes is not None:
        if len(axes) != scales.size:
            raise node.error(f"scales has {scales.size} values for the {len(axes)} axes {axes}")
        full = np.ones(rank, np.float32)
        full[axes] = scales
        scales = full
    if scales.size != rank:
        raise node.error(f"The number of dimensions of the resize op scales ({scales.size}) must match the number "
                         f"of dimensions of the input ({rank})")
    return tuple(float(s) for s in scales)


def _scales_of_sizes(node, in_shape, sizes, axes):
    """The float32 scale of each axis whose product with the input length floors to the requested
    output length (out / in in float32 can fall an ulp short: 7 -> 31 would give 30)."""
    sizes = [int(s) for s in sizes]
    axes = list(range(len(in_shape))) if axes is None else axes
    if len(sizes) != len(axes):
        raise node.error(f"ResizeOp, length of sizes ({len(sizes)}) does not match the rank of input shape "
                         f"({len(axes)})")
    policy = node.attr("keep_aspect_ratio_policy", "stretch") or "stretch"
    if policy not in ("stretch", "not_larger", "not_smaller"):
        raise node.error(f"keep_aspect_ratio_policy {policy!r} is not one of 'stretch', 'not_larger', 'not_smaller'")
    if policy != "stretch":  # one scale for the named axes, the lengths rounded (ONNX Resize-18)
        ratios = [s / in_shape[a] for s, a in zip(sizes, axes)]
        r = min(ratios) if policy == "not_larger" else max(ratios)
        sizes = [int(np.floor(r * in_shape[a] + 0.5)) for a in axes]
    out = list(in_shape)
    for a, s in zip(axes, sizes):
        out[a] = s
    scales = []
    for n_in, n_out in zip(in_shape, out):
        if n_in == n_out:
            scales.append(1.0)
            continue
        s = np.float32(n_out) / np.float32(n_in)
        while int(np.floor(np.float32(n_in) * s)) < n_out:
            s = np.nextafter(s, np.float32(np.inf))
        scales.append(float(s))
    return tuple(scales)


def _pool_args(node, rank):
    kernel = tuple(int(k) for k in node.attr("kernel_shape"))
    return dict(kernel_size=kernel, stride=_spatial(node, rank, "strides", 1),
                padding=_spatial(node, 2 * rank, "pads", 0), dilation=_spatial(node, rank, "dilations", 1),
                auto_pad=_pad_type(node), ceil_mode=bool(node.attr("ceil_mode", 0)))


@onnx_op("MaxPool", attrs=("auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "storage_order", "strides"))
def max_pool(node):
    x = node.input(0)
    if int(node.attr("storage_order", 0)):
        raise node.error("storage_order=1 (column major) is not supported")
    return [ops.max_pool(x, **_pool_args(node, x.rank - 2)), None]  # no Indices output


@onnx_op("AveragePool", attrs=("auto_pad", "ceil_mode", "count_include_pad", "dilations", "kernel_shape", "pads",
                               "strides"))
def average_pool(node):
    x = node.input(0)
    args = _pool_args(node, x.rank - 2)
    if int(node.attr("count_include_pad", 0)) and any(args["padding"]):
        raise node.error("`count_include_pad` is not supported (PopART's AveragePoolOp refuses count_include_pad=1; "
                         "with padding the divisor would count the padded elements, which PopART's pooling does not: "
                         "pad explicitly with a Pad node, or export at opset 9, where PyTorch writes a Pad)")
    return ops.average_pool(x, **args)


@onnx_op("GlobalAveragePool")
def global_average_pool(node):
    x = node.input(0)
    return ops.mean(x, axis=list(range(2, x.rank)), keepdims=True)


@onnx_op("GlobalMaxPool")
def global_max_pool(node):
    x = node.input(0)
    return ops.max(x, axis=list(range(2, x.rank)), keepdims=True)


def _softmax_2d(node, fn):
    x = node.input(0)
    if node.version >= 13:
        return fn(x, int(node.attr("axis", -1)) % x.rank)
    axis = int(node.attr("axis", 1)) % x.rank
    if axis == x.rank - 1:
        return fn(x, axis)
    # opsets < 13: the input is seen as 2-D, [prod(shape[:axis]), prod(shape[axis:])]
    outer = int(np.prod(x.shape[:axis])) if axis else 1
    y = fn(ops.reshape(x, (outer, int(np.prod(x.shape[axis:])))), 1)
    return ops.reshape(y, x.shape)


def log_softmax(x, axis):
    return ops.sub(x, ops.logsumexp(x, axis=axis, keepdims=True))


@onnx_op("Softmax", attrs=("axis",))
def softmax(node):
    return _softmax_2d(node, lambda t, a: ops.softmax(t, a))


@onnx_op("LogSoftmax", attrs=("axis",))
def log_softmax_rule(node):
    return _softmax_2d(node, log_softmax)


@onnx_op("BatchNormalization", domain=GRAPHCORE, attrs=("epsilon", "momentum"))
def gc_batch_norm(node):
    return batch_norm(node)


@onnx_op("BatchNormalization", attrs=("epsilon", "momentum", "spatial", "training_mode", "is_test",
                                      "consumed_inputs"))
def batch_norm(node):
    x, scale, bias, mean, var = (node.input(i) for i in range(5))
    eps = float(node.attr("epsilon", 1e-5))
    momentum = float(node.attr("momentum", 0.9))
    if int(node.attr("spatial", 1) or 1) != 1:
        raise node.error("spatial=0 (per-element statistics) is not supported")
    training = node.tr.training and (node.num_outputs > 1 or int(node.attr("training_mode", 0) or 0))
    if not training:
        if node.num_outputs > 1 and any(node.output_used(i) for i in range(1, node.num_outputs)):
            # an inference session computes no statistics; the running ones pass through
            return [ops.batch_norm_inference(x, scale, bias, mean, var, eps, momentum), mean, var, mean, var][
                :node.num_outputs]
        return ops.batch_norm_inference(x, scale, bias, mean, var, eps, momentum)
    # PopART's BatchNormOp in training: one op with the batch's mean and inverse standard deviation
    # (its gradient is one BatchNormGradOp: popxl's batch_norm_training / _grad)
    from popxl._frontends import batch_norm_training
    y, bmean1, inv_std = batch_norm_training(x, scale, bias, eps)
    outs = [y]
    if node.num_outputs > 1:
        bvar1 = ops.sub(ops.div(_scalar(1.0, x), ops.mul(inv_std, inv_std)), _scalar(eps, x))
        run_mean = ops.add(ops.mul(mean, _scalar(momentum, mean)), ops.mul(bmean1, _scalar(1 - momentum, mean)))
        run_var = ops.add(ops.mul(var, _scalar(momentum, var)), ops.mul(bvar1, _scalar(1 - momentum, var)))
        outs += [run_mean, run_var, bmean1, inv_std]
    return outs[:node.num_outputs]


@onnx_op("LayerNormalization", attrs=("axis", "epsilon", "stash_type"))
def layer_norm(node):
    x = node.input(0)
    axis = int(node.attr("axis", -1)) % x.rank
    eps = float(node.attr("epsilon", 1e-5))
    axes = list(range(axis, x.rank))
    mu = ops.mean(x, axis=axes, keepdims=True)
    c = ops.sub(x, mu)
    var = ops.mean(ops.mul(c, c), axis=axes, keepdims=True)
    y = ops.div(c, ops.sqrt(ops.add(var, _scalar(eps, x))))
    y = ops.mul(y, node.input(1))
    if node.has_input(2):
        y = ops.add(y, node.input(2))
    return [y, None, None]  # no Mean / InvStdDev outputs


@onnx_op("GroupNormalization", domain=GRAPHCORE, attrs=("num_groups", "epsilon"))
def group_norm(node):
    x, w, b = node.input(0), node.input(1), node.input(2)
    # no mean / inverse standard deviation outputs
    return [ops.group_norm(x, w, b, int(node.attr("num_groups")), float(node.attr("epsilon", 1e-5))), None, None]


@onnx_op("InstanceNormalization", attrs=("epsilon",))
def instance_norm(node):
    x, w, b = node.input(0), node.input(1), node.input(2)
    return ops.group_norm(x, w, b, x.shape[1], float(node.attr("epsilon", 1e-5)))


@onnx_op("Dropout", attrs=("ratio", "seed", "is_test"))
def dropout(node):
    x = node.input(0)
    ratio = float(node.attr("ratio", 0.5)) if node.version < 12 else (
        float(np.asarray(node.const(1, "ratio"))) if node.has_input(1) else 0.5)
    if not node.tr.training or ratio == 0.0:
        return [ops.identity(x), None]  # no mask output
    seed = node.tr.next_seed()
    return [ops.dropout(x, seed, ratio), None]


@onnx_op("ShapedDropout", domain=GRAPHCORE, attrs=("shape", "ratio"))
def shaped_dropout(node):
    x = node.input(0)
    if not node.tr.training:
        return ops.identity(x)
    return ops.shaped_dropout(x, node.tr.next_seed(), [int(s) for s in node.attr("shape")],
                              float(node.attr("ratio", 0.5)))


# -- reductions -------------------------------------------------------------------------------------

def _reduce_axes(node, rank):
    if node.has_attr("axes"):
        axes = [int(a) for a in node.attr("axes")]
    elif node.has_input(1):
        axes = [int(a) for a in np.asarray(node.const(1, "axes")).reshape(-1)]
    else:
        axes = []
    if not axes:
        if int(node.attr("noop_with_empty_axes", 0) or 0):
            return None
        axes = list(range(rank))
    return [a % rank for a in axes]


def _reducer(fn):
    def rule(node):
        x = node.input(0)
        axes = _reduce_axes(node, x.rank)
        if axes is None:
            return ops.identity(x)
        return fn(x, axes, bool(int(node.attr("keepdims", 1))))
    return rule


_REDUCE = {
    "ReduceSum": lambda x, a, k: ops.sum(x, a, k), "ReduceMean": lambda x, a, k: ops.mean(x, a, k),
    "ReduceMax": lambda x, a, k: ops.max(x, a, k), "ReduceMin": lambda x, a, k: ops.min(x, a, k),
    "ReduceProd": lambda x, a, k: ops.prod(x, a, k), "ReduceL1": lambda x, a, k: ops.l1(x, a, k),
    "ReduceL2": lambda x, a, k: ops.l2(x, a, k), "ReduceLogSumExp": lambda x, a, k: ops.logsumexp(x, a, k),
    "ReduceSumSquare": lambda x, a, k: ops.sumsquare(x, a, k), "ReduceLogSum": lambda x, a, k: ops.logsum(x, a, k),
}
for _name, _fn in _REDUCE.items():
    onnx_op(_name, attrs=("axes", "keepdims", "noop_with_empty_axes"))(_reducer(_fn))


@onnx_op("ArgMax", "ArgMin", attrs=("axis", "keepdims", "select_last_index"))
def arg_reduce(node):
    if int(node.attr("select_last_index", 0) or 0):
        raise node.error("select_last_index=1 is not supported")
    fn = ops.argmax if node.op_type == "ArgMax" else ops.argmin
    return fn(node.input(0), int(node.attr("axis", 0)), bool(int(node.attr("keepdims", 1))))


@onnx_op("ReduceMedian", domain=GRAPHCORE, attrs=("axes", "keepdims"))
def reduce_median(node):
    x = node.input(0)
    axes = [int(a) % x.rank for a in node.attr("axes")] if node.attr("axes") else list(range(x.rank))
    values = ops.median(x, axes, bool(int(node.attr("keepdims", 1))))
    return [values, values.producer.outputs[1]]  # the median op's second output: the int32 indices


@onnx_op("TopK", attrs=("axis", "k", "largest", "sorted"))
def topk(node):
    x = node.input(0)
    k = int(node.attr("k")) if node.version < 10 else int(np.asarray(node.const(1, "K")).reshape(-1)[0])
    return list(ops.topk(x, k, int(node.attr("axis", -1)) % x.rank, bool(int(node.attr("largest", 1) or 1)),
                         bool(int(node.attr("sorted", 1) or 1))))


@onnx_op("CumSum", attrs=("exclusive", "reverse"))
def cumsum(node):
    """PopART's CumSumOp, with ONNX's exclusive (the element itself left out) and reverse (from the
    end of the axis)."""
    from popxl._frontends import cumsum as cumsum_op

    x = node.input(0)
    axis = int(np.asarray(node.const(1, "axis")).reshape(-1)[0]) % x.rank
    exclusive, reverse = bool(int(node.attr("exclusive", 0) or 0)), bool(int(node.attr("reverse", 0) or 0))
    if not exclusive and not reverse:
        return ops.cumsum(x, axis)
    return cumsum_op(x, axis, exclusive, reverse)


# -- losses (ai.graphcore) -------------------------------------------------------------------------------

def _reduce_loss(x, reduction, node):
    mode = _REDUCTION.get(int(reduction))
    if mode is None:
        raise node.error(f"unknown reduction {reduction}; use popart.ReductionType.Sum, Mean or NoReduction")
    if mode == "none":
        return x
    return ops.sum(x) if mode == "sum" else ops.mean(x)


@onnx_op("Nll", domain=GRAPHCORE, attrs=("reduction", "ignoreIndex", "inputIsLogProbability"))
def nll(node):
    probs, labels = node.input(0), node.input(1)
    if not labels.dtype.is_int:
        raise node.error(f"the label tensor must be integers, not {labels.dtype.name}")
    mode = _REDUCTION.get(int(node.attr("reduction", 1)))
    if mode is None:
        raise node.error(f"unknown reduction {node.attr('reduction')}")
    ignore = node.attr("ignoreIndex", None)
    ignore = None if ignore is None else int(ignore)
    log_prob = bool(int(node.attr("inputIsLogProbability", 0)))
    producer = probs.producer
    if node.tr.training and not log_prob and producer is not None and producer.type == "softmax" \
            and producer.attrs.get("axis") == probs.rank - 1:
        # PopART's default NlllWithSoftmaxGradDirect pattern: in training, a softmax feeding an nll loss
        # gets the fused gradient probs - onehot, finite even where a probability underflowed to 0
        return ops.nll_loss_with_softmax_grad(probs, labels, 1, ignore_index=ignore, reduction=mode)[0]
    return ops.nll_loss(probs, labels, ignore_index=ignore, reduction=mode, log_prob=log_prob)


@onnx_op("L1", domain=GRAPHCORE, attrs=("lambda", "reduction"))
def l1(node):
    x = node.input(0)
    lam = float(node.attr("lambda"))
    per = ops.mul(ops.abs(x), _scalar(lam, x))
    if x.rank >= 1 and int(node.attr("reduction", 1)) == 1:
        # PopART: the mean over the samples of each sample's sum
        per_sample = ops.sum(per, axis=list(range(1, x.rank))) if x.rank > 1 else per
        return ops.mean(per_sample)
    return _reduce_loss(per, node.attr("reduction", 1), node)


@onnx_op("IdentityLoss", domain=GRAPHCORE, attrs=("reduction",))
def identity_loss(node):
    x = node.input(0)
    return _reduce_loss(x, node.attr("reduction", 1), node) if x.rank else ops.identity(x)


# -- LRN, RoiAlign --------------------------------------------------------------------------------------

@onnx_op("LRN", attrs=("alpha", "beta", "bias", "size"))
def lrn(node):
    """Local response normalisation across channels (AlexNet, GoogLeNet): x / (bias + alpha / size
    x sum of x^2 over the `size` channels around c)^beta, the window cut at the edges as ONNX has
    it: floor((size - 1) / 2) channels before c, ceil((size - 1) / 2) after. The window sum is the
    sum of `size` shifted slices of the zero-padded squares."""
    x = node.input(0)
    if x.rank < 3:
        raise node.error(f"the input must be (N, C, D1, ...), rank 3 or more; got shape {x.shape}")
    size = int(node.attr("size"))
    if size < 1:
        raise node.error(f"size must be at least 1, not {size}")
    alpha, beta, bias = float(node.attr("alpha", 1e-4)), float(node.attr("beta", 0.75)), float(node.attr("bias", 1.0))
    channels = x.shape[1]
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = ops.mul(x, x)

    def zeros(n):
        return [popxl.constant(np.zeros((x.shape[0], n) + tuple(x.shape[2:]), x.dtype.as_numpy()), name="lrn_pad")
                ] if n else []
    parts = zeros(before) + [sq] + zeros(after)
    padded = ops.concat(parts, 1) if len(parts) > 1 else sq
    window = None
    for k in range(size):
        piece = ops.slice(padded, start=[k], stop=[k + channels], axis=[1])
        window = piece if window is None else ops.add(window, piece)
    scale = ops.add(ops.mul(window, _scalar(alpha / size, x)), _scalar(bias, x))
    return ops.div(x, ops.pow(scale, _scalar(beta, x)))


@onnx_op("RoiAlign", attrs=("mode", "output_height", "output_width", "sampling_ratio", "spatial_scale",
                            "coordinate_transformation_mode"))
def roi_align(node):
    """PopART's RoiAlign (opset 10): average of bilinear samples per bin, no half-pixel offset
    (torchvision's aligned=False); popxl's roi_align, whose gradient reaches the image only."""
    mode = node.attr("mode", "avg") or "avg"
    if mode != "avg":
        raise node.error(f"mode {mode!r} is not supported: PopART's RoiAlign averages ('avg')")
    ctm = node.attr("coordinate_transformation_mode", None)
    if ctm not in (None, "output_half_pixel"):
        raise node.error(f"coordinate_transformation_mode {ctm!r} is not supported: PopART's RoiAlign (opset 10) "
                         f"takes the corners as they are ('output_half_pixel')")
    x, rois, idx = node.input(0), node.input(1), node.input(2)
    if not idx.dtype.is_int:
        raise node.error(f"batch_indices must be integers, not {idx.dtype.name}")
    return ops.roi_align(x, rois, idx, (int(node.attr("output_height", 1)), int(node.attr("output_width", 1))),
                         float(node.attr("spatial_scale", 1.0)), int(node.attr("sampling_ratio", 0)))


# -- random generators ----------------------------------------------------------------------------------

RANDOM_GENERATORS = ("RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike")


@onnx_op(*RANDOM_GENERATORS, attrs=("dtype", "mean", "scale", "low", "high", "seed", "shape"))
def random_generator(node):
    """Samples of N(mean, scale^2) or U[low, high) on the device (PopART's RandomNormalOp /
    RandomUniformOp and their Like forms): popxl's random_normal / random_uniform, each node with its
    own seed derived from the session's (setRandomSeed), a fresh one every micro-batch. As in
    PopART, the ONNX `seed` attribute does not fix the values: the session's seed does."""
    from .context import device_numpy_type

    like = node.op_type.endswith("Like")
    if like:
        x = node.value(0)
        shape = tuple(x.shape)
        dtype = popxl.dtype.as_dtype(x.dtype.as_numpy() if isinstance(x, popxl.Tensor) else x.dtype)
    else:
        shape = tuple(int(d) for d in node.attr("shape"))
    if node.has_attr("dtype") or not like:
        dtype = popxl.dtype.as_dtype(device_numpy_type(int(node.attr("dtype", 1))))
    if not dtype.is_floating_point:
        raise node.error(f"dtype {dtype.name} is not supported: random values are float32 or float16")
    seed = node.tr.next_seed()
    if node.op_type.startswith("RandomNormal"):
        return ops.random_normal(seed, shape, float(node.attr("mean", 0.0)), float(node.attr("scale", 1.0)), dtype)
    return ops.random_uniform(seed, shape, float(node.attr("low", 0.0)), float(node.attr("high", 1.0)), dtype)
