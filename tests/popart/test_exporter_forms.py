"""ONNX ops in the forms later opsets and PyTorch's two exporters (TorchScript and dynamo) write
them, through popart.InferenceSession against onnx.reference: Pad-18's `axes`, AveragePool's
`count_include_pad` as PopART takes it, ..."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import popart

from popart_helpers import reference, run_inference


def _model(opset, nodes, x_shape, consts=None, outputs=("Y",)):
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (consts or {}).items()]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, [f"d{i}" for i in range(len(x_shape))])
                           for o in outputs],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def _check(proto, x, outputs=("Y",), exact=False):
    got = run_inference(proto, {"X": x}, list(outputs))
    want = reference(proto, {"X": x}, list(outputs))
    for o, w in zip(outputs, want):
        assert got[o].shape == w.shape, o
        np.testing.assert_allclose(got[o], w, rtol=0 if exact else 1e-5, atol=0 if exact else 1e-6, err_msg=o)


def _np_pad(x, axes, pads, mode, value):
    """NumPy's Pad-18: `pads` (befores, then afters) for `axes`; a negative pad crops."""
    n = len(axes)
    for k, a in enumerate(axes):
        before, after = pads[k], pads[k + n]
        x = np.take(x, np.arange(max(0, -before), x.shape[a] - max(0, -after)), axis=a)
        widths = [(0, 0)] * x.ndim
        widths[a] = (max(0, before), max(0, after))
        x = np.pad(x, widths, mode=mode, **({"constant_values": value} if mode == "constant" else {}))
    return x


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("axes,pads", [([2, 3], [1, 0, 2, 1]), ([3], [2, 1]), ([1, 3], [0, 2, 1, -1])])
def test_pad_18_axes(mode, axes, pads, rng):
    x = rng.normal(size=(2, 3, 4, 5)).astype(np.float32)
    consts = {"pads": np.array(pads, np.int64), "value": np.array(0.5, np.float32), "axes": np.array(axes, np.int64)}
    node = helper.make_node("Pad", ["X", "pads", "value" if mode == "constant" else "", "axes"], ["Y"], mode=mode)
    got = run_inference(_model(18, [node], x.shape, consts), {"X": x}, ["Y"])["Y"]
    np.testing.assert_array_equal(got, _np_pad(x, axes, pads, mode, 0.5))


def test_pad_18_negative_axes(rng):
    x = rng.normal(size=(1, 2, 3, 4)).astype(np.float32)
    node = helper.make_node("Pad", ["X", "pads", "", "axes"], ["Y"], mode="reflect")
    proto = _model(18, [node], x.shape, {"pads": np.array([1, 2], np.int64), "axes": np.array([-1], np.int64)})
    got = run_inference(proto, {"X": x}, ["Y"])["Y"]
    np.testing.assert_array_equal(got, np.pad(x, [(0, 0), (0, 0), (0, 0), (1, 2)], mode="reflect"))


def test_average_pool_count_include_pad_with_padding_is_popart_s_error():
    """PyTorch's avg_pool2d counts the padding by default (inception_v3), and its exporter writes
    count_include_pad=1 from opset 10 on; PopART's AveragePoolOp refuses it."""
    node = helper.make_node("AveragePool", ["X"], ["Y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)
    proto = _model(11, [node], (1, 2, 5, 5))
    with pytest.raises(popart.popart_exception, match="`count_include_pad` is not supported"):
        run_inference(proto, {"X": np.zeros((1, 2, 5, 5), np.float32)}, ["Y"])


def test_average_pool_count_include_pad_without_padding_runs(rng):
    """Without padding the divisor is the window either way (DenseNet's transitions, exported with
    count_include_pad=1 and no pads), so the pool runs."""
    x = rng.normal(size=(1, 3, 6, 7)).astype(np.float32)
    node = helper.make_node("AveragePool", ["X"], ["Y"], kernel_shape=[2, 2], strides=[2, 2], count_include_pad=1)
    _check(_model(11, [node], x.shape), x)
