"""Every gradient rule, checked numerically.

For each case the forward graph is differentiated with ``popxl.transforms.autodiff``;
``test_grad_vs_finite_differences`` runs the gradient graph with a NumPy interpreter (float64) and
compares it with central finite differences of the forward graph; ``test_grad_on_ipu_model`` runs
forward and gradient graphs through ``popxl.Session`` on a small simulated IPU and compares with the
same float64 gradients.
"""
import numpy as np
import pytest

import popxl
import popxl.ops as ops

from popxl.ops.nn import _batch_norm_training as _bn_training

from .grad_check import GradCase, fd_grads, numpy_grads, session_grads

_rng = np.random.default_rng(0)


def r(*shape, lo=-1.0, hi=1.0):
    return _rng.uniform(lo, hi, shape).astype(np.float32)


def pos(*shape):
    return r(*shape, lo=0.5, hi=2.0)


def away(*shape, gap=0.1):
    """Uniform in [-1, 1] but at least ``gap`` away from 0 (for kinks at 0)."""
    x = r(*shape)
    return (np.sign(x) * (np.abs(x) + gap)).astype(np.float32)


def ints(hi, *shape):
    return _rng.integers(0, hi, shape).astype(np.int32)


def distinct(*shape):
    """Values far apart (for max / min / topk, no ties)."""
    n = int(np.prod(shape))
    return (_rng.permutation(n).reshape(shape) * 0.37 - n * 0.15).astype(np.float32)


def sub_graph(fn, *specs):
    return popxl.gcg().ir.create_graph(fn, *specs)


def spec(t):
    return popxl.TensorSpec(t.shape, t.dtype)


# -- forward functions that need a few lines ------------------------------------------------------
def _nll_softmax_direct(logits, labels):
    probs = ops.softmax(logits, 1)
    loss, _ = ops.nll_loss_with_softmax_grad(probs, labels)
    return loss


def _nll_softmax_general(logits, labels):
    probs = ops.softmax(logits, 1)
    loss, _ = ops.nll_loss_with_softmax_grad(probs, labels, loss_grad=2.0, reduction="sum")
    return loss + ops.sum(probs * probs)


def _call(x, w):
    def inner(a, b):
        return ops.tanh(a @ b), ops.sum(a * a)
    g = sub_graph(inner, spec(x), spec(w))
    y, s = ops.call(g, x, w)
    z, _ = ops.call(g, y, w)  # the same graph called twice
    return ops.sum(z) + s


def _repeat_rnn(h, w, u):
    def body(h, w, u):
        return ops.tanh(h @ w + u)
    g = sub_graph(body, spec(h), spec(w), spec(u))
    (out,) = ops.repeat(g, 3, h, w, u)
    return out


def _repeat_two_carried(a, b, w):
    def body(a, b, w):
        return a * w + b, ops.sin(a)
    g = sub_graph(body, spec(a), spec(b), spec(w))
    return ops.repeat(g, 4, a, b, w)


def _repeat_invariant_only(x, w):
    # nothing per-iteration is needed by the gradient: no stacking
    def body(acc, w):
        return acc + w * 2.0
    g = sub_graph(body, spec(x), spec(w))
    return ops.repeat(g, 3, x, w)


def _conditional(flag, x, w):
    def then_(x, w):
        return ops.exp(x * w)

    def else_(x):
        return ops.sin(x) * 3.0
    tg = sub_graph(then_, spec(x), spec(w))
    eg = sub_graph(else_, spec(x))
    (out,) = ops.conditional(flag, tg, eg, then_inputs=[x, w], else_inputs=[x])
    return out


def _repeat_calls_graph(h, w):
    def cell(h, w):
        return ops.sin(ops.exp(h * w))  # the gradient needs exp(.), an intermediate of the cell

    cg = sub_graph(cell, spec(h), spec(w))

    def body(h, w):
        (o,) = ops.call(cg, h, w)
        return o * 0.5

    g = sub_graph(body, spec(h), spec(w))
    (out,) = ops.repeat(g, 3, h, w)
    return out


def _call_contains_repeat(x, w):
    def body(h, w):
        return ops.tanh(h * w + 0.1)

    def inner(x, w):
        bg = sub_graph(body, spec(x), spec(w))
        (o,) = ops.repeat(bg, 2, x, w)
        return ops.sum(o * o)

    ig = sub_graph(inner, spec(x), spec(w))
    (s,) = ops.call(ig, x, w)
    return s


def _nested_repeat(x, w):
    def inner_body(h, w):
        return ops.sin(h * w)

    def outer_body(h, w):
        ib = sub_graph(inner_body, spec(h), spec(w))
        (o,) = ops.repeat(ib, 2, h, w)
        return ops.tanh(o + h)

    ob = sub_graph(outer_body, spec(x), spec(w))
    (out,) = ops.repeat(ob, 3, x, w)
    return out


def _conditional_in_repeat(flag, x):
    def then_(h):
        return ops.exp(ops.sin(h))

    def else_(h):
        return h * h

    def body(h, flag):
        tg = sub_graph(then_, spec(h))
        eg = sub_graph(else_, spec(h))
        (o,) = ops.conditional(flag, tg, eg, [h], [h])
        return o * 0.7

    bg = sub_graph(body, spec(x), spec(flag))
    (out,) = ops.repeat(bg, 3, x, flag)
    return out


def _dropout(x, seed):
    return ops.dropout(x, seed, 0.4) * 2.0


def _group_norm(x, w, b):
    return ops.group_norm(x, w, b, 2)


def _layer_norm(x, w, b):
    return ops.layer_norm(x, w, b)


def _split(x):
    a, b, c = ops.split(x, [1, 2, 2], axis=1)
    return a * 2.0, c  # b unused: its gradient part is zero


def _topk(x):
    v, _ = ops.topk(x, 2, axis=1, largest=True, sorted=True)
    return v


def _dynamic_update(t, u, idx):
    return ops.dynamic_update(t, idx, u, [1], [2], True)


def _reuse(x):
    # x feeds several ops: partial gradients are summed
    return ops.sum(ops.exp(x) + x * x + ops.sin(x), 1)


CASES = [
    # unary
    GradCase("exp", ops.exp, [r(3, 4)]),
    GradCase("exp_", lambda x: ops.exp_(x * 1.0), [r(3, 4)]),
    GradCase("log", ops.log, [pos(3, 4)]),
    GradCase("sqrt", ops.sqrt, [pos(3, 4)]),
    GradCase("relu", ops.relu, [away(3, 4)]),
    GradCase("relu_", lambda x: ops.relu_(x * 1.0), [away(3, 4)]),
    GradCase("gelu", ops.gelu, [r(3, 4, lo=-3, hi=3)]),
    GradCase("geluerf", ops.geluerf, [np.concatenate([r(11, lo=-3, hi=3), np.zeros(1, np.float32)])]),
    GradCase("tanh", ops.tanh, [r(3, 4)]),
    GradCase("sin", ops.sin, [r(3, 4)]),
    GradCase("cos", ops.cos, [r(3, 4)]),
    GradCase("abs", ops.abs, [away(3, 4)]),
    GradCase("negate", ops.negate, [r(3, 4)]),
    GradCase("swish", ops.swish, [r(3, 4, lo=-3, hi=3)]),
    # made from their op table entries' derivatives
    GradCase("sigmoid", ops.sigmoid, [r(3, 4, lo=-3, hi=3)]),
    GradCase("reciprocal", ops.reciprocal, [r(3, 4, lo=0.5, hi=2)]),
    GradCase("erf", ops.erf, [r(3, 4, lo=-2, hi=2)]),
    GradCase("sign", lambda x: ops.sign(x) + x, [away(3, 4)]),
    GradCase("floor", lambda x: ops.floor(x * 3.0) + x, [r(2, 3) + 0.01]),
    GradCase("identity", lambda x: ops.identity(x) * 2.0, [r(3)]),
    GradCase("detach", lambda x: x * ops.detach(x), [r(3, 4)], reference=lambda xs, cots: [cots[0] * xs[0]]),
    GradCase("print_tensor", lambda x: ops.print_tensor(x * 2.0, "t", print_self=False), [r(2)]),
    GradCase("cast", lambda x: ops.cast(ops.cast(x, popxl.float16), popxl.float32) * x, [r(3, 4)],
             rtol=1e-2, atol=1e-3, session_rtol=1e-2, session_atol=1e-2),
    # binary, broadcasting
    GradCase("add_bcast", lambda a, b: a + b, [r(3, 4), r(4)]),
    GradCase("add_", lambda a, b: ops.add_(a * 1.0, b), [r(3, 4), r(4)]),
    GradCase("sub_bcast", lambda a, b: a - b, [r(2, 1, 3), r(4, 3)]),
    GradCase("mul_bcast", lambda a, b: a * b, [r(3, 1), r(1, 4)]),
    GradCase("div_bcast", lambda a, b: a / b, [r(3, 4), pos(4)]),
    GradCase("pow", lambda a, b: ops.pow(a, b), [pos(3, 4), r(3, 4)]),
    GradCase("pow_scalar", lambda a: a ** 3.0, [r(3, 4)]),
    GradCase("fmod", lambda a: ops.fmod(a, 0.7), [r(2, 3) * 3]),
    GradCase("maximum", lambda a, b, c: ops.maximum(a, b, c), [distinct(3, 4), distinct(4), distinct(3, 1)]),
    GradCase("minimum", ops.minimum, [distinct(3, 4), distinct(4)]),
    GradCase("where", lambda a, b: ops.where(a > 0.0, a * 2.0, b), [away(3, 4), r(4)]),
    GradCase("clip", lambda x: ops.clip(x, -0.5, 0.5), [np.array([-0.9, -0.3, 0.1, 0.45, 0.7, -0.6], np.float32)]),
    GradCase("scaled_add", lambda x, y: ops.scaled_add(x, y, 0.5, 2.0), [r(3, 4), r(3, 4)]),
    GradCase("scaled_add_tensor", lambda x, y, a, b: ops.scaled_add(x, y, a, b), [r(3, 4), r(4), r(), r()]),
    # matmul
    GradCase("matmul", lambda a, b: a @ b, [r(3, 4), r(4, 5)]),
    GradCase("matmul_batched", lambda a, b: a @ b, [r(2, 3, 4), r(4, 5)]),
    GradCase("matmul_broadcast", lambda a, b: a @ b, [r(2, 1, 3, 4), r(3, 4, 2)]),
    GradCase("matmul_vec_mat", lambda a, b: a @ b, [r(4), r(4, 5)]),
    GradCase("matmul_mat_vec", lambda a, b: a @ b, [r(3, 4), r(4)]),
    GradCase("matmul_dot", lambda a, b: a @ b, [r(4), r(4)]),
    # reductions
    GradCase("sum_axis", lambda x: ops.sum(x, 0), [r(3, 4)]),
    GradCase("sum_keepdims", lambda x: ops.sum(x, [0, 2], keepdims=True), [r(2, 3, 4)]),
    GradCase("sum_all", lambda x: ops.sum(x), [r(3, 4)]),
    GradCase("mean", lambda x: ops.mean(x, 1), [r(3, 4)]),
    GradCase("max", lambda x: ops.max(x, 1), [distinct(3, 4)]),
    GradCase("min", lambda x: ops.min(x, [0, 1], keepdims=True), [distinct(3, 4)]),
    GradCase("prod", lambda x: ops.prod(x, 1), [pos(3, 4)]),
    GradCase("l1", lambda x: ops.l1(x, 1), [away(3, 4)]),
    GradCase("l2", lambda x: ops.l2(x, 0), [r(3, 4)]),
    GradCase("sumsquare", lambda x: ops.sumsquare(x, 1, keepdims=True), [r(3, 4)]),
    GradCase("logsumexp", lambda x: ops.logsumexp(x, 1), [r(3, 4)]),
    GradCase("logsum", lambda x: ops.logsum(x, 0), [pos(3, 4)]),
    GradCase("cumsum", lambda x: ops.cumsum(x, 1), [r(3, 4)]),
    GradCase("median", lambda x: ops.median(x, 1), [distinct(3, 5)]),
    GradCase("median_axes", lambda x: ops.median(x, [0, 2], keepdims=True), [distinct(2, 3, 2)]),
    GradCase("lamb_square", lambda x: ops.lamb_square(x), [r(3, 4)]),
    GradCase("topk", _topk, [distinct(3, 5)]),
    # nn
    GradCase("softmax", lambda x: ops.softmax(x, 1), [r(3, 5)]),
    GradCase("softmax_axis0", lambda x: ops.softmax(x, 0), [r(3, 5)]),
    GradCase("group_norm", _group_norm, [r(2, 4, 3), r(4), r(4)]),
    GradCase("layer_norm", _layer_norm, [r(3, 5), r(5), r(5)]),
    GradCase("batch_norm_training", lambda x, s, b: _bn_training(x, s, b)[0] * _bn_training(x, s, b)[0],
             [r(3, 4, 2, 3), r(4, lo=0.5, hi=1.5), r(4)]),
    GradCase("relu6", lambda x: ops.clip(x, 0.0, 6.0), [np.array([-0.9, 0.3, 5.5, 6.7, 2.0, -0.2], np.float32)]),
    GradCase("batch_norm_inference", lambda x, s, b, m, v: ops.batch_norm_inference(x, s, b, m, v),
             [r(2, 3, 4), r(3), r(3), r(3), pos(3)]),
    GradCase("nll_loss_mean", lambda p, l: ops.nll_loss(ops.softmax(p, 1), l), [r(4, 5), ints(5, 4)]),
    GradCase("nll_loss_sum_ignore", lambda p, l: ops.nll_loss(ops.softmax(p, 1), l, ignore_index=2, reduction="sum"),
             [r(6, 3), np.array([0, 2, 1, 2, 1, 0], np.int32)]),
    GradCase("nll_loss_none_logprob", lambda p, l: ops.nll_loss(p, l, reduction="none", log_prob=True),
             [r(4, 3), ints(3, 4)]),
    GradCase("nll_loss_with_softmax_grad", _nll_softmax_direct, [r(4, 5), ints(5, 4)]),
    GradCase("nll_loss_with_softmax_grad_general", _nll_softmax_general, [r(4, 5), ints(5, 4)]),
    # layout
    GradCase("reshape", lambda x: ops.reshape(x, (2, 6)) * 1.5, [r(3, 4)]),
    GradCase("flatten_squeeze", lambda x, y: ops.flatten(x) + ops.squeeze(y), [r(3, 1, 2), r(1, 6)]),
    GradCase("transpose", lambda x: ops.transpose(x, (2, 0, 1)), [r(2, 3, 4)]),
    GradCase("slice", lambda x: x[1:3, ::2], [r(4, 5)]),
    GradCase("slice_negative_step", lambda x: ops.slice(x, start=[4, 2], stop=[0, None], step=[-2, -1], axis=[0, 1]),
             [r(6, 3)]),
    GradCase("subsample", lambda x: ops.subsample(x, [2, 3]), [r(5, 7)]),
    GradCase("diag", lambda x: x.diag(), [r(3, 5)]),
    GradCase("roi_align", lambda x, rois, b: ops.roi_align(x, rois, b, (2, 3), 0.5, 2),
             [r(2, 3, 5, 6), np.array([[0.5, 1.0, 9.0, 7.5], [2.0, 0.0, 4.0, 3.0], [-3.0, 1.0, 13.0, 12.0]],
                                     np.float32), np.array([1, 0, 1], np.int32)], wrt=[0]),
    GradCase("interpolate_nearest", lambda x: ops.interpolate(x, (1.0, 1.0, 2.0, 1.5)), [r(1, 2, 3, 4)]),
    GradCase("interpolate_linear", lambda x: ops.interpolate(x, (1.0, 1.0, 1.5, 0.5), mode="linear"),
             [r(1, 2, 4, 6)]),
    GradCase("interpolate_linear_align_corners",
             lambda x: ops.interpolate(x, (1.0, 2.5), mode="linear", coordinate_transformation_mode="align_corners"),
             [r(2, 3)]),
    GradCase("interpolate_cubic", lambda x: ops.interpolate(x, (1.0, 1.0, 1.7, 0.6), mode="cubic"),
             [r(1, 2, 4, 5)]),
    GradCase("concat", lambda a, b: ops.concat([a, b, a], 1), [r(2, 3), r(2, 2)]),
    GradCase("split", _split, [r(2, 5)]),
    # indexing
    GradCase("gather", lambda x, i: ops.gather(x, i), [r(5, 3), np.array([[0, 4], [2, 0]], np.int32)]),
    GradCase("gather_axis1", lambda x, i: ops.gather(x, i, axis=1), [r(2, 5, 2), np.array([1, 1, 3], np.int32)]),
    GradCase("tied_gather", lambda x, i: ops.tied_gather(x, i), [r(6, 2), np.array([5, 0, 5], np.int32)]),
    GradCase("scatter", lambda x, i, v: ops.scatter(x, i, v), [r(4, 3), np.array([[1, 0, 3]], np.int32), r(1, 3)],
             wrt=[0]),
    GradCase("scatter_reduce", lambda d, i: ops.scatter_reduce(d, i, "sum", axis=0, axis_size=3),
             [r(4, 2), np.array([2, 0, 2, 1], np.int32)]),
    GradCase("grouped_gather", lambda x, i: ops.groupedgather(x, i, axis=1, group_size=2),
             [r(2, 3, 5), np.array([[4, 0, 4], [1, 1, 2]], np.int32)]),
    GradCase("grouped_gather_axis0", lambda x, i: ops.groupedgather(x, i, axis=0, group_size=3),
             [r(3, 4, 2), np.array([[3], [0], [2]], np.int32)]),
    GradCase("dynamic_slice", lambda x, i: ops.dynamic_slice(x, i, [0], [2], True),
             [r(5, 3), np.array([2], np.uint32)]),
    GradCase("dynamic_update", _dynamic_update, [r(3, 5), r(3, 2), np.array([1], np.uint32)]),
    GradCase("onehot_values", lambda i, v: ops.onehot(i, 4, v, 1) * 1.0, [np.array([0, 3, 1], np.int32), r(2)]),
    # random
    GradCase("dropout", _dropout, [r(4, 6), np.array([7, 11], np.uint32)],
             # y = 2 x mask / (1 - p): the gradient must use the forward mask, i.e. equal cot * y / x
             session_reference=lambda xs, cots, outs: [cots[0] * outs[0] / xs[0]]),
    # windows
    GradCase("conv", lambda x, w: ops.conv(x, w, stride=(2, 1), padding=(1, 0, 1, 1), dilation=(1, 2)),
             [r(2, 3, 5, 6), r(4, 3, 3, 2)]),
    GradCase("conv_groups", lambda x, w: ops.conv(x, w, groups=2), [r(1, 4, 4, 4), r(2, 2, 2, 2)]),
    # grouped and depthwise (the HMAC forward / input gradient, the VMAC weight gradient)
    GradCase("conv_depthwise_strided", lambda x, w: ops.conv(x, w, stride=(2, 2), padding=(1, 1, 1, 1), groups=3),
             [r(2, 3, 6, 5), r(3, 1, 3, 3)]),
    GradCase("conv_depthwise_dilated", lambda x, w: ops.conv(x, w, stride=(1, 2), padding=(2, 0, 1, 1),
                                                              dilation=(2, 1), groups=4), [r(1, 4, 5, 7), r(8, 1, 2, 3)]),
    GradCase("conv_grouped_3x2", lambda x, w: ops.conv(x, w, stride=(1, 1), padding=(0, 1, 1, 0), groups=2),
             [r(2, 6, 4, 4), r(4, 3, 1, 3)]),
    GradCase("conv1d_depthwise", lambda x, w: ops.conv(x, w, stride=(2,), padding=(2, 1), dilation=(1,), groups=3),
             [r(2, 3, 9), r(3, 1, 5)]),
    GradCase("conv_transpose_depthwise", lambda x, w: ops.conv_transpose(x, w, stride=(2, 2), padding=(1, 1, 0, 0),
                                                                           groups=3), [r(1, 3, 3, 3), r(3, 1, 3, 3)]),
    GradCase("conv1d", lambda x, w: ops.conv(x, w, stride=(2,), padding=(1, 1), dilation=(1,)),
             [r(2, 2, 7), r(3, 2, 3)]),
    GradCase("conv_transpose", lambda x, w: ops.conv_transpose(x, w, stride=(2, 1), padding=(1, 0, 0, 1),
                                                                 output_padding=(1, 0)),
             [r(2, 3, 3, 4), r(3, 2, 3, 2)]),
    GradCase("average_pool", lambda x: ops.average_pool(x, (2, 2), stride=(2, 1)), [r(1, 2, 4, 5)]),
    GradCase("average_pool_pads_ceil", lambda x: ops.average_pool(x, (3, 2), stride=(2, 2), padding=(1, 0, 1, 0),
                                                                  ceil_mode=True), [r(2, 1, 5, 5)]),
    GradCase("max_pool", lambda x: ops.max_pool(x, (2, 2)), [distinct(1, 2, 4, 4)]),
    GradCase("max_pool_overlap_pads", lambda x: ops.max_pool(x, (3, 3), stride=(2, 1), padding=(1, 1, 1, 0)),
             [distinct(2, 1, 5, 4)]),
    GradCase("max_pool_1d_dilated", lambda x: ops.max_pool(x, (2,), stride=(1,), dilation=(2,)), [distinct(1, 3, 7)]),
    # control flow
    GradCase("call", _call, [r(3, 3), r(3, 3)]),
    GradCase("repeat_rnn", _repeat_rnn, [r(2, 3), r(3, 3), r(2, 3)]),
    GradCase("repeat_two_carried", _repeat_two_carried, [r(3), r(3), r(3)]),
    GradCase("repeat_invariant_only", _repeat_invariant_only, [r(3), r(3)]),
    GradCase("conditional_then", _conditional, [np.array(True), r(3), r(3)]),
    GradCase("conditional_else", _conditional, [np.array(False), r(3), r(3)]),
    GradCase("repeat_calls_graph", _repeat_calls_graph, [r(3), r(3)]),
    GradCase("call_contains_repeat", _call_contains_repeat, [r(2), r(2)]),
    GradCase("nested_repeat", _nested_repeat, [r(3), r(3)]),
    GradCase("conditional_in_repeat", _conditional_in_repeat, [np.array(True), r(3)]),
    GradCase("conditional_in_repeat_else", _conditional_in_repeat, [np.array(False), r(3)]),
    # structure
    GradCase("accumulation", _reuse, [r(2, 3)]),
    GradCase("accumulation_decomposed", _reuse, [r(2, 3)], decompose=True),
    GradCase("call_decomposed", _call, [r(3, 3), r(3, 3)], decompose=True),
    GradCase("graph_output_is_input", lambda x: x, [r(3)]),
    GradCase("duplicate_outputs", lambda x: (x * 2.0, x, x), [r(3)]),
    GradCase("float16", lambda x: ops.exp(x) * x, [r(4).astype(np.float16)], rtol=1e-2, atol=1e-2,
             session_rtol=1e-2, session_atol=1e-2),
    GradCase("unused_input", lambda x, y: x * 2.0, [r(3), r(2)]),
    # (N, 1) labels of (N, C) probs, as PopART's Nll ops take them
    GradCase("nll_loss_column_labels", lambda p, l: ops.nll_loss(p, l, reduction="none") * 1.5,
             [pos(4, 3), ints(3, 4, 1)], wrt=[0]),
    GradCase("nll_softmax_column_labels", lambda x, l: ops.nll_loss_with_softmax_grad(ops.softmax(x, 1), l)[0],
             [r(4, 3), ints(3, 4, 1)], wrt=[0]),
    # mixed precision as PopART's ScaledAddOp allows: each gradient in its own input's type
    GradCase("scaled_add_mixed", lambda x, y: ops.scaled_add(x, y, 0.5, -2.0), [r(3, 4), r(3, 4).astype(np.float16)],
             rtol=1e-2, atol=1e-2, session_rtol=1e-2, session_atol=1e-2),
    GradCase("scaled_add_mixed_tensor_scales", lambda x, y, a, b: ops.scaled_add(x, y, a, b),
             [r(3, 4).astype(np.float16), r(3, 4), r(), r().astype(np.float16)],
             rtol=1e-2, atol=1e-2, session_rtol=1e-2, session_atol=2e-2),
    GradCase("int_input", lambda x, i: x * ops.cast(i, popxl.float32), [r(3), ints(4, 3)]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_grad_vs_finite_differences(case):
    got, (_, g, outs, info, cots) = numpy_grads(case)
    want = fd_grads(case, (g, outs, cots))
    assert len(got) == len(want) == len(case.wrt)
    for i, (a, b) in zip(case.wrt, zip(got, want)):
        assert a.shape == case.inputs[i].shape
        np.testing.assert_allclose(a, b, rtol=case.rtol, atol=case.atol, err_msg=f"{case.name}: input {i}")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_grad_on_ipu_model(case):
    if case.session_reference is not None:
        got, fwd, cots = session_grads(case, with_forward=True)
        assert any(np.any(f == 0) for f in fwd), "dropout dropped nothing"
        want = case.session_reference([x.astype(np.float64) for x in case.inputs], cots, fwd)
    else:
        want, _ = numpy_grads(case)
        got = session_grads(case)
    for i, (a, b) in zip(case.wrt, zip(got, want)):
        np.testing.assert_allclose(a, b, rtol=case.session_rtol, atol=case.session_atol,
                                   err_msg=f"{case.name}: input {i}")


@pytest.mark.parametrize("dtype, eps", [(np.float32, 1e-10), (np.float16, 6.104e-05)])
def test_nll_loss_gradient_floors_the_probability_it_divides_by(dtype, eps):
    """PopART's NllGradOpx: d loss / d p = -1 / max(p, eps) at the label (1e-10, or 6.104e-5 for
    float16), 0 elsewhere; finite where p is 0."""
    probs = np.array([[0.0, 1.0], [0.5, 0.5], [0.25, 0.75]], dtype)
    labels = np.array([0, 1, 1], np.int32)
    case = GradCase("nll_floor", lambda p, l: ops.nll_loss(p, l, reduction="none"), [probs, labels], wrt=[0])
    (grad,), _, cots = session_grads(case, with_forward=True)
    want = np.zeros((3, 2))
    want[np.arange(3), labels] = -np.asarray(cots[0], np.float64) / np.maximum(probs[np.arange(3), labels], eps)
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad.astype(np.float64), want, rtol=2e-3)
