"""Each ONNX op the frontend translates, run on a simulated IPU and compared with onnx.reference
(ONNX's reference implementation) over awkward shapes (size 1, primes)."""
from __future__ import annotations


import numpy as np
import onnx
import pytest
from onnx import helper as oh

import popart

from popart_helpers import check_against_reference, device, run_inference

SHAPES = [(1,), (7,), (3, 5), (2, 1, 13)]


def _unary_model(op, shape, dtype="FLOAT", **attrs):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo(dtype, list(shape)), "x")
    y = getattr(b.aiOnnx, op)([x], **attrs)
    b.addOutputTensor(y)
    return b.getModelProto(), x, y


UNARY = ["abs", "neg", "exp", "sqrt", "log", "relu", "tanh", "sigmoid", "erf", "ceil", "floor", "sin", "cos",
         "sign", "reciprocal", "softplus", "softsign", "identity"]


@pytest.mark.parametrize("dtype", ["FLOAT", "FLOAT16"])
@pytest.mark.parametrize("op", UNARY)
def test_unary(op, dtype, rng):
    shape = SHAPES[sum(map(ord, op)) % len(SHAPES)]
    npt = np.float32 if dtype == "FLOAT" else np.float16
    data = rng.normal(0, 2, shape)
    if op in ("sqrt", "log"):
        data = np.abs(data) + 0.1
    if op == "reciprocal":
        data = np.where(np.abs(data) < 0.1, 0.5, data)
    proto, x, y = _unary_model(op, shape, dtype)
    tol = (2e-5, 2e-6) if dtype == "FLOAT" else (4e-3, 2e-3)
    check_against_reference(proto, {x: data.astype(npt)}, [y], rtol=tol[0], atol=tol[1])


@pytest.mark.parametrize("op,attrs", [("leakyrelu", {"alpha": 0.2}), ("elu", {"alpha": 0.7}), ("selu", {}),
                                      ("hardsigmoid", {"alpha": 0.3, "beta": 0.4}), ("clip", {"min": -0.5, "max": 1.0})])
def test_unary_with_attributes(op, attrs, rng):
    data = rng.normal(0, 2, (3, 11)).astype(np.float32)
    proto, x, y = _unary_model(op, data.shape, **attrs)
    check_against_reference(proto, {x: data}, [y])


BINARY = ["add", "sub", "mul", "div", "pow", "max", "min", "sum", "mean"]


@pytest.mark.parametrize("dtype", ["FLOAT", "FLOAT16"])
@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("shapes", [((3, 5), (3, 5)), ((2, 1, 7), (7,)), ((1,), (4, 3))])
def test_binary_broadcast(op, shapes, dtype, rng):
    b = popart.Builder()
    a_ = b.addInputTensor(popart.TensorInfo(dtype, list(shapes[0])), "a")
    c_ = b.addInputTensor(popart.TensorInfo(dtype, list(shapes[1])), "b")
    y = getattr(b.aiOnnx, op)([a_, c_])
    npt = np.float32 if dtype == "FLOAT" else np.float16
    da = rng.uniform(0.5, 2, shapes[0]).astype(npt)
    db = rng.uniform(0.5, 2, shapes[1]).astype(npt)
    rtol = 1e-5 if dtype == "FLOAT" else 2e-3
    if op in ("max", "min", "sum", "mean"):  # onnx.reference's variadic ops broadcast only into the first input
        want = {"max": np.maximum, "min": np.minimum, "sum": np.add, "mean": lambda p, q: (p + q) / 2}[op](da, db)
        np.testing.assert_allclose(run_inference(b.getModelProto(), {a_: da, c_: db}, [y])[y], want, rtol=rtol)
        return
    check_against_reference(b.getModelProto(), {a_: da, c_: db}, [y], rtol=rtol)


def test_add_with_an_empty_input(rng):
    """An empty batch through ONNX Add (broadcast against a non-empty tensor, then an empty initializer)."""
    b = popart.Builder()
    a_ = b.addInputTensor(popart.TensorInfo("FLOAT", [0, 3]), "a")
    c_ = b.addInputTensor(popart.TensorInfo("FLOAT", [3]), "b")
    w = b.addInitializedInputTensor(np.zeros((0, 3), np.float32), "w")
    y = b.aiOnnx.add([a_, c_])
    z = b.aiOnnx.add([y, w])
    got = check_against_reference(b.getModelProto(), {a_: np.zeros((0, 3), np.float32),
                                                      c_: rng.normal(size=3).astype(np.float32)}, [y, z])
    assert got[z].shape == (0, 3)
    got = run_inference(b.getModelProto(), {a_: np.zeros((2, 0, 3), np.float32), c_: np.ones((2, 3), np.float32)},
                        [z], bps=2)
    assert got[z].shape == (2, 0, 3)


@pytest.mark.parametrize("op", ["equal", "greater", "less"])
def test_comparisons(op, rng):
    b = popart.Builder()
    a_ = b.addInputTensor(popart.TensorInfo("FLOAT", [4, 5]), "a")
    c_ = b.addInputTensor(popart.TensorInfo("FLOAT", [5]), "b")
    y = getattr(b.aiOnnx, op)([a_, c_])
    da = rng.integers(0, 3, (4, 5)).astype(np.float32)
    db = rng.integers(0, 3, (5,)).astype(np.float32)
    check_against_reference(b.getModelProto(), {a_: da, c_: db}, [y])


def test_where_and_logical(rng):
    b = popart.Builder()
    c = b.addInputTensor(popart.TensorInfo("BOOL", [3, 4]), "c")
    d = b.addInputTensor(popart.TensorInfo("BOOL", [3, 4]), "d")
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [3, 4]), "x")
    outs = [b.aiOnnx.logical_and([c, d]), b.aiOnnx.logical_or([c, d]), b.aiOnnx.logical_not([c]),
            b.aiOnnx.logical_xor([c, d]), b.aiOnnx.where([c, x, b.aiOnnx.neg([x])])]
    check_against_reference(b.getModelProto(), {c: rng.random((3, 4)) > 0.5, d: rng.random((3, 4)) > 0.5,
                                                x: rng.normal(size=(3, 4)).astype(np.float32)}, outs)


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (3, 7, 5), (13, 2, 11)])
def test_matmul(m, k, n, rng):
    b = popart.Builder()
    a_ = b.addInputTensor(popart.TensorInfo("FLOAT", [m, k]), "a")
    w = b.addInitializedInputTensor(rng.normal(size=(k, n)).astype(np.float32), "w")
    y = b.aiOnnx.matmul([a_, w])
    check_against_reference(b.getModelProto(), {a_: rng.normal(size=(m, k)).astype(np.float32)}, [y], rtol=1e-4)


@pytest.mark.parametrize("transA,transB,alpha,beta", [(0, 0, 1.0, 1.0), (1, 1, 0.5, 2.0), (0, 1, 1.0, 0.0)])
def test_gemm(transA, transB, alpha, beta, rng):  # noqa: N803
    b = popart.Builder()
    A = rng.normal(size=(5, 3) if transA else (3, 5)).astype(np.float32)
    B = rng.normal(size=(7, 5) if transB else (5, 7)).astype(np.float32)
    a_ = b.addInputTensor(popart.TensorInfo("FLOAT", list(A.shape)), "a")
    w = b.addInitializedInputTensor(B, "w")
    c = b.addInitializedInputTensor(rng.normal(size=(7,)).astype(np.float32), "c")
    y = b.aiOnnx.gemm([a_, w, c], alpha=alpha, beta=beta, transA=transA, transB=transB)
    check_against_reference(b.getModelProto(), {a_: A}, [y], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("group,stride,pads", [(1, 1, [0, 0, 0, 0]), (1, 2, [1, 1, 1, 1]), (2, 1, [1, 0, 0, 1])])
def test_conv(group, stride, pads, rng):
    b = popart.Builder()
    X = rng.normal(size=(2, 4, 7, 6)).astype(np.float32)
    W = rng.normal(size=(6, 4 // group, 3, 3)).astype(np.float32)
    x = b.addInputTensor(popart.TensorInfo("FLOAT", list(X.shape)), "x")
    w = b.addInitializedInputTensor(W, "w")
    bias = b.addInitializedInputTensor(rng.normal(size=(6,)).astype(np.float32), "bias")
    y = b.aiOnnx.conv([x, w, bias], dilations=[1, 1], group=group, kernel_shape=[3, 3], pads=pads,
                      strides=[stride, stride])
    check_against_reference(b.getModelProto(), {x: X}, [y], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", ["maxpool", "averagepool"])
@pytest.mark.parametrize("kernel,stride,pads", [([2, 2], [2, 2], [0, 0, 0, 0]), ([3, 3], [1, 2], [1, 1, 1, 1])])
def test_pools(op, kernel, stride, pads, rng):
    b = popart.Builder()
    X = rng.normal(size=(2, 3, 7, 5)).astype(np.float32)
    x = b.addInputTensor(popart.TensorInfo("FLOAT", list(X.shape)), "x")
    kw = dict(kernel_shape=kernel, strides=stride, pads=pads)
    if op == "maxpool":
        y = b.aiOnnx.maxpool([x], 1, **kw)[0]
    else:
        y = b.aiOnnx.averagepool([x], count_include_pad=0, **kw)
    check_against_reference(b.getModelProto(), {x: X}, [y], rtol=1e-5)


@pytest.mark.parametrize("op", ["globalaveragepool", "globalmaxpool"])
def test_global_pools(op, rng):
    proto, x, y = _unary_model(op, (2, 3, 5, 4))
    check_against_reference(proto, {x: rng.normal(size=(2, 3, 5, 4)).astype(np.float32)}, [y])


@pytest.mark.parametrize("op,axis", [("softmax", 1), ("softmax", 2), ("logsoftmax", 1), ("softmax", -1)])
def test_softmax_opset10_coerces_to_2d(op, axis, rng):
    """Opsets < 13 take the input as 2-D [prod(shape[:axis]), prod(shape[axis:])] (onnx.reference
    implements only the opset-13 meaning, so NumPy is the reference here)."""
    X = rng.normal(0, 3, (2, 3, 5)).astype(np.float32)
    proto, x, y = _unary_model(op, X.shape, axis=axis)
    a = axis % 3
    f = X.reshape(int(np.prod(X.shape[:a])), -1)
    e = np.exp(f - f.max(1, keepdims=True))
    sm = e / e.sum(1, keepdims=True)
    want = (sm if op == "softmax" else np.log(sm)).reshape(X.shape)
    np.testing.assert_allclose(run_inference(proto, {x: X}, [y])[y], want, rtol=1e-5, atol=1e-6)


def test_batch_normalization_inference(rng):
    b = popart.Builder()
    X = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    x = b.addInputTensor(popart.TensorInfo("FLOAT", list(X.shape)), "x")
    values = [rng.normal(size=3).astype(np.float32), rng.normal(size=3).astype(np.float32),
              rng.normal(size=3).astype(np.float32), rng.uniform(0.5, 2, 3).astype(np.float32)]
    params = [b.addInitializedInputTensor(v, n) for v, n in zip(values, ("scale", "bias", "mean", "var"))]
    y = b.aiOnnx.batchnormalization([x] + params, 1, epsilon=1e-3)[0]
    s, bias, mean, var = (v.reshape(1, 3, 1, 1) for v in values)
    want = s * (X - mean) / np.sqrt(var + 1e-3) + bias
    np.testing.assert_allclose(run_inference(b.getModelProto(), {x: X}, [y])[y], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["reducesum", "reducemean", "reducemax", "reducemin", "reduceprod", "reducel1",
                                "reducel2", "reducelogsumexp", "reducesumsquare"])
@pytest.mark.parametrize("axes,keepdims", [([1], 1), ([0, 2], 0), (None, 1)])
def test_reductions(op, axes, keepdims, rng):
    kw = {"keepdims": keepdims}
    if axes is not None:
        kw["axes"] = axes
    proto, x, y = _unary_model(op, (3, 4, 5), **kw)
    data = rng.uniform(0.5, 1.5, (3, 4, 5)).astype(np.float32)
    check_against_reference(proto, {x: data}, [y], rtol=1e-4)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reductions(op, rng):
    proto, x, y = _unary_model(op, (4, 7), axis=1, keepdims=0)
    got = run_inference(proto, {x: rng.normal(size=(4, 7)).astype(np.float32)}, [y])
    assert got[y].dtype == np.int32


def test_layout_ops(rng):
    b = popart.Builder()
    X = rng.normal(size=(2, 3, 4)).astype(np.float32)
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3, 4]), "x")
    shape = b.aiOnnx.constant(np.array([4, -1], np.int64))
    outs = [b.aiOnnx.reshape([x, shape]), b.aiOnnx.transpose([x], perm=[2, 0, 1]), b.aiOnnx.flatten([x], axis=2),
            b.aiOnnx.unsqueeze([x], axes=[0, 3]), b.aiOnnx.squeeze([b.aiOnnx.unsqueeze([x], axes=[1])], axes=[1]),
            b.aiOnnx.concat([x, x], axis=1),
            b.aiOnnx.slice([x, b.aiOnnx.constant(np.array([1, 0], np.int64)), b.aiOnnx.constant(np.array([3, 2], np.int64)),
                            b.aiOnnx.constant(np.array([2, 0], np.int64))]),
            b.aiOnnx.gather([x, b.aiOnnx.constant(np.array([2, 0, 2], np.int32))], axis=1),
            b.aiOnnx.cast([x], "INT32"), b.aiOnnx.identity([x])]
    outs += b.aiOnnx.split([x], 2, axis=2, split=[1, 3])
    check_against_reference(b.getModelProto(), {x: X}, outs)


def test_gather_with_device_indices(rng):
    b = popart.Builder()
    table = b.addInitializedInputTensor(rng.normal(size=(11, 3)).astype(np.float32), "table")
    idx = b.addInputTensor(popart.TensorInfo("INT32", [5]), "idx")
    y = b.aiOnnx.gather([table, idx], axis=0)
    check_against_reference(b.getModelProto(), {idx: np.array([0, 10, 3, 3, 7], np.int32)}, [y])


def test_opset11_ops(rng):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [3, 6]), "x")
    o11 = b.aiOnnxOpset11
    outs = [o11.clip([x, o11.constant(np.float32(-0.5)), o11.constant(np.float32(0.5))]),
            o11.squeeze([o11.unsqueeze([x], axes=[-1])], axes=[-1]),
            o11.slice([x, o11.constant(np.array([4], np.int64)), o11.constant(np.array([0], np.int64)),
                       o11.constant(np.array([1], np.int64)), o11.constant(np.array([-2], np.int64))])]
    outs += o11.topk([x, o11.constant(np.array([2], np.int64))], axis=1)
    check_against_reference(b.getModelProto(), {x: rng.normal(size=(3, 6)).astype(np.float32)}, outs)


def test_shape_ops_fold_to_constants(rng):
    """Shape -> Gather -> Concat -> Reshape, as exporters write a flatten: folded on the host."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3, 4]), "x")
    s = b.aiOnnx.shape([x])
    n = b.aiOnnx.gather([s, b.aiOnnx.constant(np.array([0], np.int64))], axis=0)
    target = b.aiOnnx.concat([n, b.aiOnnx.constant(np.array([-1], np.int64))], axis=0)
    y = b.aiOnnx.reshape([x, target])
    check_against_reference(b.getModelProto(), {x: rng.normal(size=(2, 3, 4)).astype(np.float32)}, [y])


def test_lstm_matches_reference(rng):
    seq, batch, inp, hid = 3, 2, 5, 4
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [seq, batch, inp]), "x")
    w = b.addInitializedInputTensor(rng.normal(0, 0.5, (1, 4 * hid, inp)).astype(np.float32), "W")
    r = b.addInitializedInputTensor(rng.normal(0, 0.5, (1, 4 * hid, hid)).astype(np.float32), "R")
    bias = b.addInitializedInputTensor(rng.normal(0, 0.5, (1, 8 * hid)).astype(np.float32), "B")
    y, yh, yc = b.aiOnnx.lstm([x, w, r, bias], 3, hidden_size=hid)
    check_against_reference(b.getModelProto(), {x: rng.normal(size=(seq, batch, inp)).astype(np.float32)}, [y, yh, yc],
                            rtol=1e-4, atol=1e-5)


def test_float16_inference(rng):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT16", [3, 8]), "x")
    W = rng.normal(size=(8, 5)).astype(np.float16)
    w = b.addInitializedInputTensor(W, "w")
    y = b.aiOnnx.relu([b.aiOnnx.matmul([x, w])])
    X = rng.normal(size=(3, 8)).astype(np.float16)
    got = run_inference(b.getModelProto(), {x: X}, [y])
    assert got[y].dtype == np.float16
    np.testing.assert_allclose(got[y].astype(np.float32), np.maximum(X.astype(np.float32) @ W.astype(np.float32), 0),
                               rtol=1e-2, atol=1e-2)


def test_transformer_block_matches_reference(rng):
    """Self-attention and an MLP with layer norms as opset-11 exporters write them (ReduceMean, Sub,
    Pow, Sqrt, Div; gelu through Erf), batched MatMul with Transpose, Softmax on the last axis."""
    B, S, D, H = 2, 5, 8, 16
    b = popart.Builder()
    o = b.aiOnnxOpset11
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [B, S, D]), "x")

    def w(shape, name):
        return b.addInitializedInputTensor((rng.normal(size=shape) / np.sqrt(shape[0])).astype(np.float32), name)

    def c(v):
        return o.constant(np.asarray(v, np.float32))

    def layer_norm(t):
        mu = o.reducemean([t], axes=[-1], keepdims=1)
        d = o.sub([t, mu])
        var = o.reducemean([o.pow([d, c(2.0)])], axes=[-1], keepdims=1)
        return o.div([d, o.sqrt([o.add([var, c(1e-5)])])])

    h = layer_norm(x)
    q, k, v = (o.matmul([h, w((D, D), n)]) for n in ("wq", "wk", "wv"))
    scores = o.div([o.matmul([q, o.transpose([k], perm=[0, 2, 1])]), c(np.sqrt(D))])
    attn = o.matmul([o.softmax([scores], axis=2), v])
    x1 = o.add([x, o.matmul([attn, w((D, D), "wo")])])
    u = o.matmul([layer_norm(x1), w((D, H), "w1")])
    gelu = o.mul([o.mul([u, c(0.5)]), o.add([c(1.0), o.erf([o.div([u, c(np.sqrt(2.0))])])])])
    y = o.add([x1, o.matmul([gelu, w((H, D), "w2")])])
    check_against_reference(b.getModelProto(), {x: rng.normal(size=(B, S, D)).astype(np.float32)}, [y],
                            rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("stride,pads,out_pad", [(1, [0, 0, 0, 0], [0, 0]), (2, [1, 1, 1, 1], [1, 1])])
def test_conv_transpose(stride, pads, out_pad, rng):
    b = popart.Builder()
    X = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    x = b.addInputTensor(popart.TensorInfo("FLOAT", list(X.shape)), "x")
    w = b.addInitializedInputTensor(rng.normal(size=(3, 2, 3, 3)).astype(np.float32), "w")
    bias = b.addInitializedInputTensor(rng.normal(size=(2,)).astype(np.float32), "bias")
    y = b.aiOnnx.convtranspose([x, w, bias], kernel_shape=[3, 3], strides=[stride, stride], pads=pads,
                               output_padding=out_pad)
    check_against_reference(b.getModelProto(), {x: X}, [y], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_opset11(mode, rng):
    b = popart.Builder()
    o = b.aiOnnxOpset11
    X = rng.normal(size=(1, 2, 3, 4)).astype(np.float32)
    x = b.addInputTensor(popart.TensorInfo("FLOAT", list(X.shape)), "x")
    roi = o.constant(np.zeros(0, np.float32))
    scales = o.constant(np.array([1, 1, 2, 2], np.float32))
    y = o.resize([x, roi, scales], mode=mode)
    check_against_reference(b.getModelProto(), {x: X}, [y], rtol=1e-5, atol=1e-5)


def test_upsample_nearest(rng):
    b = popart.Builder(opsets={"ai.onnx": 9, "ai.graphcore": 1})
    X = rng.normal(size=(1, 1, 2, 3)).astype(np.float32)
    x = b.addInputTensor(popart.TensorInfo("FLOAT", list(X.shape)), "x")
    y = b.aiOnnx.upsample([x, b.aiOnnx.constant(np.array([1, 1, 2, 3], np.float32))], mode="nearest")
    got = run_inference(b.getModelProto(), {x: X}, [y])
    np.testing.assert_array_equal(got[y], X.repeat(2, axis=2).repeat(3, axis=3))


@pytest.mark.parametrize("direction", ["reverse", "bidirectional"])
def test_lstm_directions(direction, rng):
    seq, batch, inp, hid = 4, 2, 3, 5
    dirs = 2 if direction == "bidirectional" else 1
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [seq, batch, inp]), "x")
    w = b.addInitializedInputTensor(rng.normal(0, 0.5, (dirs, 4 * hid, inp)).astype(np.float32), "W")
    r = b.addInitializedInputTensor(rng.normal(0, 0.5, (dirs, 4 * hid, hid)).astype(np.float32), "R")
    h0 = b.addInitializedInputTensor(rng.normal(0, 0.5, (dirs, batch, hid)).astype(np.float32), "h0")
    outs = b.aiOnnx.lstm([x, w, r, "", "", h0], 3, hidden_size=hid, direction=direction)
    check_against_reference(b.getModelProto(), {x: rng.normal(size=(seq, batch, inp)).astype(np.float32)}, outs,
                            rtol=1e-4, atol=1e-5)


def test_lstm_gradient_matches_finite_differences(rng):
    """Training through the LSTM loop: the weight gradient against central differences of the
    model evaluated in float64 by onnx.reference."""
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator
    seq, batch, inp, hid = 3, 2, 3, 4
    W = rng.normal(0, 0.5, (1, 4 * hid, inp)).astype(np.float32)
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [seq, batch, inp]), "x")
    w = b.addInitializedInputTensor(W, "W")
    r = b.addInitializedInputTensor(rng.normal(0, 0.5, (1, 4 * hid, hid)).astype(np.float32), "R")
    y = b.aiOnnx.lstm([x, w, r], 1, hidden_size=hid)[0]
    s = b.aiOnnx.reducesum([b.aiOnnx.mul([y, y])], keepdims=0)
    loss = b.aiGraphcore.identityloss([s])
    X = rng.normal(size=(seq, batch, inp)).astype(np.float32)
    sess = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, [popart.reservedGradientPrefix() + w]), loss,
                                  popart.ConstSGD(0.0), device())
    sess.prepareDevice()
    sess.weightsFromHost()
    out = sess.initAnchorArrays()
    sess.run(popart.PyStepIO({x: X}, out))
    grad = out[popart.reservedGradientPrefix() + w]

    # the same forward pass (LSTM, Mul, ReduceSum) in float64 with onnx.reference
    m = onnx.load_from_string(b.getModelProto())
    nodes = [n for n in m.graph.node if n.domain == ""]
    inits = [numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name) for t in m.graph.initializer]
    g = onnx.helper.make_graph(nodes, "g", [onnx.helper.make_tensor_value_info(x, onnx.TensorProto.DOUBLE, X.shape),
                                             onnx.helper.make_tensor_value_info("w64", onnx.TensorProto.DOUBLE, W.shape)],
                               [onnx.helper.make_tensor_value_info(s, onnx.TensorProto.DOUBLE, [])],
                               [t for t in inits if t.name != w])
    for n in g.node:
        for i, name in enumerate(n.input):
            if name == w:
                n.input[i] = "w64"
    ev = ReferenceEvaluator(onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 10)]))

    def f(wv):
        return float(ev.run(None, {x: X.astype(np.float64), "w64": wv})[0])
    eps = 1e-6
    for idx in [(0, 0, 0), (0, 5, 1), (0, 4 * hid - 1, inp - 1), (0, 2 * hid + 1, 2)]:
        wp, wm = W.astype(np.float64), W.astype(np.float64)
        wp[idx] += eps
        wm[idx] -= eps
        num = (f(wp) - f(wm)) / (2 * eps)
        assert abs(grad[idx] - num) < 1e-3 * max(1.0, abs(num)), (idx, grad[idx], num)


def test_ops_from_files_against_reference(rng):
    """The ai.onnx rules the Builder's opsets (6 to 11) cannot all reach, from an opset-17 file:
    Pad, Expand, CumSum, ConstantOfShape, Range, Size, GreaterOrEqual, LessOrEqual, IsNaN,
    ReduceLogSum, PRelu, InstanceNormalization, LayerNormalization, Xor."""
    F, B, c = onnx.TensorProto.FLOAT, onnx.TensorProto.BOOL, onnx.numpy_helper.from_array
    inits = [c(np.array([1, 0, 0, 2], np.int64), "pads"), c(np.array([2, 1, 4], np.int64), "eshape"),
             c(np.array(1, np.int64), "axis1"), c(np.array([2, 3], np.int64), "cshape"), c(np.array(1, np.int64), "r0"),
             c(np.array(8, np.int64), "r1"), c(np.array(3, np.int64), "rd"), c(np.array([0.25], np.float32), "slope"),
             c(np.full(3, 0.5, np.float32), "scale3"), c(np.arange(3, dtype=np.float32), "bias3"),
             c(rng.normal(size=4).astype(np.float32), "ln_s"), c(rng.normal(size=4).astype(np.float32), "ln_b")]
    nodes = [oh.make_node("Constant", [], ["padv"], value=c(np.array(1.5, np.float32), "pv")),
             oh.make_node("Pad", ["x", "pads", "padv"], ["pad"]),
             oh.make_node("Expand", ["col", "eshape"], ["expand"]),
             oh.make_node("CumSum", ["x", "axis1"], ["cumsum"]),
             oh.make_node("ConstantOfShape", ["cshape"], ["cos"], value=c(np.array([7.0], np.float32), "v")),
             oh.make_node("Range", ["r0", "r1", "rd"], ["range"]),
             oh.make_node("Size", ["x"], ["size"]),
             oh.make_node("GreaterOrEqual", ["x", "y"], ["ge"]), oh.make_node("LessOrEqual", ["x", "y"], ["le"]),
             oh.make_node("IsNaN", ["nanx"], ["isnan"]),
             oh.make_node("ReduceLogSum", ["pos"], ["rls"], axes=[1], keepdims=0),
             oh.make_node("PRelu", ["x", "slope"], ["prelu"]),
             oh.make_node("InstanceNormalization", ["img", "scale3", "bias3"], ["inorm"], epsilon=1e-3),
             oh.make_node("LayerNormalization", ["x", "ln_s", "ln_b"], ["lnorm"], epsilon=1e-4),
             oh.make_node("Xor", ["b1", "b2"], ["xor"])]
    vi = oh.make_tensor_value_info
    g = oh.make_graph(nodes, "g", [vi("x", F, [3, 4]), vi("y", F, [3, 4]), vi("col", F, [1, 4]), vi("nanx", F, [5]),
                                   vi("pos", F, [2, 5]), vi("img", F, [2, 3, 4, 5]), vi("b1", B, [6]), vi("b2", B, [6])],
                      [vi("pad", F, [4, 6])], initializer=inits)
    m = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])
    feeds = {"x": rng.integers(-2, 3, (3, 4)).astype(np.float32), "y": rng.integers(-2, 3, (3, 4)).astype(np.float32),
             "col": rng.normal(size=(1, 4)).astype(np.float32), "nanx": np.array([1, np.nan, 0, np.nan, -3], np.float32),
             "pos": rng.uniform(0.5, 2, (2, 5)).astype(np.float32), "img": rng.normal(size=(2, 3, 4, 5)).astype(np.float32),
             "b1": rng.random(6) > 0.5, "b2": rng.random(6) > 0.5}
    outs = [n.output[0] for n in nodes[1:]]
    got = check_against_reference(m.SerializeToString(), feeds, outs, rtol=1e-4, atol=1e-5)
    assert got["pad"].shape == (4, 6) and got["range"].tolist() == [1, 4, 7]


@pytest.mark.parametrize("dtype", ["FLOAT", "FLOAT16"])
def test_round_halves_to_even(dtype):
    """ai.onnx Round (opset 11) against onnx.reference, ai.graphcore Round against NumPy (both
    round halves to the even integer)."""
    X = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -1.2, 1.7, 3.49, -3.51, 0, 7], np.float32)
    X = X.astype(np.float32 if dtype == "FLOAT" else np.float16)
    for graphcore in (False, True):
        b = popart.Builder()
        x = b.addInputTensor(popart.TensorInfo(dtype, [12]), "x")
        y = b.aiGraphcore.round([x]) if graphcore else b.aiOnnxOpset11.round([x])
        if graphcore:  # onnx.reference does not know ai.graphcore ops
            np.testing.assert_array_equal(run_inference(b.getModelProto(), {x: X}, [y])[y], np.round(X))
        else:
            check_against_reference(b.getModelProto(), {x: X}, [y], rtol=0, atol=0)


@pytest.mark.parametrize("opset", [6, 7, 8, 9, 10, 11])
def test_each_builder_opset_against_reference(opset, rng):
    """The ops of an MLP and a CNN through each aiOnnx opset the Builder has, with that opset's
    signatures (Gemm / Add broadcast attributes before 7, MaxPool's second output from 8, Slice's
    inputs from 10), against onnx.reference."""
    b = popart.Builder(opsets={"ai.onnx": opset, "ai.graphcore": 1})
    o = b.aiOnnx
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3, 4, 4]), "x")
    w = b.addInitializedInputTensor(rng.normal(size=(48, 5)).astype(np.float32), "w")
    c = b.addInitializedInputTensor(rng.normal(size=(5,)).astype(np.float32), "c")
    k = b.addInitializedInputTensor(rng.normal(size=(2, 3, 3, 3)).astype(np.float32), "k")
    old = {"broadcast": 1} if opset < 7 else {}
    f = o.flatten([x], 1)
    gm = o.gemm([f, w, c], **old)
    pool = dict(kernel_shape=[2, 2], strides=[2, 2])
    outs = [gm, o.add([gm, c], **old), o.sub([gm, c], **old), o.mul([gm, c], **old), o.div([gm, c], **old),
            o.matmul([f, w]), o.softmax([gm]), o.logsoftmax([gm]), o.relu([gm]), o.sigmoid([gm]), o.tanh([gm]),
            o.sqrt([o.abs([gm])]), o.pow([o.abs([gm]), gm]), o.transpose([gm]), o.concat([gm, gm], 1),
            o.reshape([gm, o.constant(np.array([5, 2], np.int64))]), o.unsqueeze([gm], [0]),
            o.squeeze([o.unsqueeze([gm], [0])], [0]), o.gather([gm, o.constant(np.array([1, 0], np.int32))], 1),
            o.reducesum([gm], axes=[1]), o.reducemean([gm], axes=[0]), o.cast([gm], "INT32"), o.identity([gm]),
            o.conv([x, k], [1, 1], 1, [3, 3], [1, 1, 1, 1], [1, 1]), o.averagepool([x], **pool),
            o.maxpool([x], 1, **pool)[0] if opset >= 8 else o.maxpool([x], **pool), o.globalaveragepool([x])]
    if opset >= 9:
        outs += [o.erf([gm]), o.where([o.greater([gm, c]), gm, o.neg([gm])])]
    if opset >= 10:
        outs.append(o.slice([gm, o.constant(np.array([1], np.int64)), o.constant(np.array([4], np.int64))]))
    else:
        outs.append(o.slice([gm], axes=[1], starts=[1], ends=[4]))
    check_against_reference(b.getModelProto(), {x: rng.normal(size=(2, 3, 4, 4)).astype(np.float32)}, outs,
                            rtol=1e-4, atol=1e-4)
