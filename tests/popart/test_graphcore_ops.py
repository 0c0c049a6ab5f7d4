"""The ai.graphcore ops the frontend translates (gelu, swish, nllloss, l1loss, identityloss, scale,
subsample, dynamic slices and updates, group norm, printtensor, ...), run on a simulated IPU and
compared with NumPy definitions: onnx.reference does not know them (ai.onnx ops: test_ops.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import popart

from popart_helpers import run_inference


def _erf(x):
    return np.vectorize(math.erf)(x)


GRAPHCORE_UNARY = {  # ai.graphcore ops onnx.reference does not know: NumPy definitions
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "geluerf": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "swish": lambda x: x / (1 + np.exp(-x)),
    "detach": lambda x: x,
    "nop": lambda x: x,
}


@pytest.mark.parametrize("op", GRAPHCORE_UNARY)
def test_graphcore_unary(op, rng):
    data = rng.normal(0, 2, (3, 7)).astype(np.float32)
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [3, 7]), "x")
    y = getattr(b.aiGraphcore, op)([x])
    b.addOutputTensor(y)
    got = run_inference(b.getModelProto(), {x: data}, [y])[y]
    np.testing.assert_allclose(got, GRAPHCORE_UNARY[op](data.astype(np.float64)), rtol=2e-5, atol=2e-6)


def test_graphcore_ops_against_numpy(rng):
    b = popart.Builder()
    X = rng.normal(size=(4, 6)).astype(np.float32)
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [4, 6]), "x")
    gc = b.aiGraphcore
    outs = [gc.scale([x], 2.5), gc.subsample([x], [2, 3]), gc.gelu([x]), gc.identityloss([x]),
            gc.identityloss([x], reduction=popart.ReductionType.Sum), gc.l1loss([x], 0.1)]
    got = run_inference(b.getModelProto(), {x: X}, outs)
    c = np.sqrt(2 / np.pi)
    gelu = 0.5 * X * (1 + np.tanh(c * (X + 0.044715 * X ** 3)))
    want = [2.5 * X, X[::2, ::3], gelu, X.mean(), X.sum(), (0.1 * np.abs(X)).sum(1).mean()]
    for o, w in zip(outs, want):
        np.testing.assert_allclose(got[o], w, rtol=1e-5, atol=1e-6, err_msg=o)


def test_nll_loss_against_numpy(rng):
    b = popart.Builder()
    P = rng.uniform(0.1, 1, (5, 4)).astype(np.float32)
    P /= P.sum(1, keepdims=True)
    L = np.array([0, 3, 1, 1, 2], np.int32)
    p = b.addInputTensor(popart.TensorInfo("FLOAT", [5, 4]), "p")
    lab = b.addInputTensor(popart.TensorInfo("INT32", [5]), "lab")
    mean = b.aiGraphcore.nllloss([p, lab])
    summed = b.aiGraphcore.nllloss([p, lab], popart.ReductionType.Sum)
    ignore = b.aiGraphcore.nllloss([p, lab], popart.ReductionType.Mean, ignoreIndex=1)
    got = run_inference(b.getModelProto(), {p: P, lab: L}, [mean, summed, ignore])
    nll = -np.log(P[np.arange(5), L])
    np.testing.assert_allclose(got[mean], nll.mean(), rtol=1e-5)
    np.testing.assert_allclose(got[summed], nll.sum(), rtol=1e-5)
    np.testing.assert_allclose(got[ignore], nll[L != 1].mean(), rtol=1e-5)


def test_more_graphcore_ops_against_numpy(rng, capsys):
    b = popart.Builder()
    X = rng.normal(size=(3, 7)).astype(np.float32)
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [3, 7]), "x")
    d = b.addInputTensor(popart.TensorInfo("FLOAT", [3, 7]), "d")
    gc = b.aiGraphcore
    outs = [gc.remainder([x, d]), gc.fmod([x, d]), gc.incrementmod([x], 0.5, 2.0), gc.reducemedian([x], axes=[1],
                                                                                                 keepdims=0)[0],
            gc.printtensor([x], title="my_x"), gc.swish([x]), gc.geluerf([x]), gc.expm1([x]), gc.log1p([gc.scale(
                [b.aiOnnx.abs([x])], 1.0)]), gc.detach([x]), gc.nop([x])]
    D = np.where(rng.random((3, 7)) > 0.5, 1.5, -1.5).astype(np.float32)
    got = run_inference(b.getModelProto(), {x: X, d: D}, outs)
    from math import erf
    want = [np.mod(X, D), np.fmod(X, D), np.fmod(X + 0.5, 2.0), np.sort(X, 1)[:, 3], X, X / (1 + np.exp(-X)),
            0.5 * X * (1 + np.vectorize(erf)(X / np.sqrt(2))), np.expm1(X), np.log1p(np.abs(X)), X, X]
    for o, w in zip(outs, want):
        np.testing.assert_allclose(got[o], w, rtol=2e-5, atol=2e-6, err_msg=o)
    printed = capsys.readouterr()
    assert "my_x: [" in printed.out + printed.err


def test_graphcore_tensor_ops_against_numpy(rng):
    """ScaledAdd, DynamicSlice / DynamicUpdate at device offsets, GroupNormalization, Init, the
    attribute forms of Reshape and Slice, ShapedDropout (the identity in inference)."""
    X, Y = rng.normal(size=(4, 6)).astype(np.float32), rng.normal(size=(4, 6)).astype(np.float32)
    U, IMG = rng.normal(size=(2, 3)).astype(np.float32), rng.normal(size=(2, 4, 3, 5)).astype(np.float32)
    GW, GB = rng.normal(size=4).astype(np.float32), rng.normal(size=4).astype(np.float32)
    OFF = np.array([1, 2], np.uint32)
    b = popart.Builder()
    x, y = (b.addInputTensor(popart.TensorInfo("FLOAT", [4, 6]), n) for n in ("x", "y"))
    u = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]), "u")
    off = b.addInputTensor(popart.TensorInfo("UINT32", [2]), "off")
    img = b.addInputTensor(popart.TensorInfo("FLOAT", list(IMG.shape)), "img")
    gw, gb = b.addInitializedInputTensor(GW, "gw"), b.addInitializedInputTensor(GB, "gb")
    gc = b.aiGraphcore
    outs = [gc.scaledadd([x, y], scale0=0.5, scale1=-2.0), gc.dynamicslice([x, off], axes=[0, 1], sizes=[2, 3]),
            gc.dynamicupdate([x, off, u], axes=[0, 1], sizes=[2, 3]), gc.groupnormalization([img, gw, gb], 2, 1e-3)[0],
            gc.init([3, 2], popart.DataType.FLOAT, popart.InitType.Zero), gc.reshape([x], [3, 8]),
            gc.slice([x], ends=[3, 5], starts=[1, 2], axes=[0, 1]), gc.shapeddropout([x], [4, 1], 0.5)]
    got = run_inference(b.getModelProto(), {x: X, y: Y, u: U, off: OFF, img: IMG}, outs)
    updated = X.copy()
    updated[1:3, 2:5] = U
    g = IMG.reshape(2, 2, -1)
    gn = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-3)).reshape(IMG.shape)
    gn = gn * GW.reshape(1, 4, 1, 1) + GB.reshape(1, 4, 1, 1)
    want = [0.5 * X - 2 * Y, X[1:3, 2:5], updated, gn, np.zeros((3, 2), np.float32), X.reshape(3, 8), X[1:3, 2:5], X]
    for o, w in zip(outs, want):
        np.testing.assert_allclose(got[o], w, rtol=1e-5, atol=1e-5, err_msg=o)
