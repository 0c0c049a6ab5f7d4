"""ONNX Resize and Upsample through popart.InferenceSession, as PopART's ResizeOp / UpsampleOp take
them (op/resize.cpp, op/upsample.cpp, popx/op/resizex.cpp), against onnx.reference over awkward
shapes: every mode and coordinate transformation PopART computes, scales and sizes, downsampling."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import popart

from popart_helpers import reference, run_inference


def _model(opset, x_shape, inputs, attrs, op="Resize", consts=()):
    """One Resize node of X and the constant inputs `consts` ((name, array) or '' for absent)."""
    inits, names = [], ["X"]
    for i, c in enumerate(consts):
        if c is None:
            names.append("")
            continue
        name = f"c{i}"
        inits.append(onnx.numpy_helper.from_array(np.asarray(c), name))
        names.append(name)
    node = helper.make_node(op, names, ["Y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x_shape))],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["n", "c", "h", "w"])],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def _check(proto, x, rtol=1e-5, atol=1e-5):
    got = run_inference(proto, {"X": x}, ["Y"])["Y"]
    want = reference(proto, {"X": x}, ["Y"])[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    return got


NO_ROI = np.zeros(0, np.float32)


@pytest.mark.parametrize("ctm", ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"])
@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scales", [(1, 1, 2, 3), (1, 1, 1.5, 0.6), (1, 1, 2.3, 1), (1, 1, 0.5, 0.5)])
def test_resize_linear_and_cubic(mode, ctm, scales, rng):
    x = rng.normal(size=(1, 2, 5, 7)).astype(np.float32)
    proto = _model(13, x.shape, None, dict(mode=mode, coordinate_transformation_mode=ctm, cubic_coeff_a=-0.75),
                   consts=[NO_ROI, np.array(scales, np.float32)])
    _check(proto, x)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"])
@pytest.mark.parametrize("ctm", ["half_pixel", "align_corners", "asymmetric"])
def test_resize_nearest_modes(nearest_mode, ctm, rng):
    x = rng.normal(size=(2, 3, 4, 6)).astype(np.float32)
    proto = _model(11, x.shape, None, dict(mode="nearest", coordinate_transformation_mode=ctm,
                                           nearest_mode=nearest_mode),
                   consts=[NO_ROI, np.array([1, 1, 2.5, 0.5], np.float32)])
    _check(proto, x, rtol=0, atol=0)


@pytest.mark.parametrize("n_in,n_out", [(7, 31), (7, 61), (5, 13), (8, 64), (9, 4)])
def test_resize_sizes_keep_the_requested_length(n_in, n_out, rng):
    """out / in in float32 times in can fall an ulp short of out (7 -> 31 floors to 30): the output
    has the length `sizes` asks for, with PyTorch's bilinear values (onnx.reference is not the
    reference here: it blends the wrong neighbour where a coordinate is an exact integer)."""
    torch = pytest.importorskip("torch")
    x = rng.normal(size=(1, 2, n_in, 3)).astype(np.float32)
    proto = _model(11, x.shape, None, dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel"),
                   consts=[NO_ROI, np.zeros(0, np.float32), np.array([1, 2, n_out, 3], np.int64)])
    got = run_inference(proto, {"X": x}, ["Y"])["Y"]
    want = torch.nn.functional.interpolate(torch.from_numpy(x), size=(n_out, 3), mode="bilinear",
                                           align_corners=False).numpy()
    assert got.shape == (1, 2, n_out, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_resize_18_axes_and_sizes(rng):
    x = rng.normal(size=(1, 3, 6, 5)).astype(np.float32)
    proto = _model(18, x.shape, None, dict(mode="linear", axes=[2, 3]),
                   consts=[None, None, np.array([11, 4], np.int64)])
    assert _check(proto, x).shape == (1, 3, 11, 4)
    proto = _model(18, x.shape, None, dict(mode="cubic", axes=[3]),
                   consts=[None, np.array([1.6], np.float32)])
    assert _check(proto, x).shape == (1, 3, 6, 8)


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_resize_18_keep_aspect_ratio(policy, rng):
    x = rng.normal(size=(1, 1, 4, 6)).astype(np.float32)
    proto = _model(18, x.shape, None, dict(mode="nearest", axes=[2, 3], keep_aspect_ratio_policy=policy),
                   consts=[None, None, np.array([10, 9], np.int64)])
    _check(proto, x, rtol=0, atol=0)


def test_resize_against_pytorch_bicubic(rng):
    """PyTorch's bicubic (align_corners False and True) is Keys' kernel with a = -0.75 and clamped
    neighbours: what PopART's cubic Resize computes."""
    torch = pytest.importorskip("torch")
    x = rng.normal(size=(1, 2, 6, 5)).astype(np.float32)
    for align, ctm in ((False, "pytorch_half_pixel"), (True, "align_corners")):
        want = torch.nn.functional.interpolate(torch.from_numpy(x), size=(13, 8), mode="bicubic",
                                               align_corners=align).numpy()
        proto = _model(11, x.shape, None, dict(mode="cubic", coordinate_transformation_mode=ctm, cubic_coeff_a=-0.75),
                       consts=[NO_ROI, np.zeros(0, np.float32), np.array([1, 2, 13, 8], np.int64)])
        got = run_inference(proto, {"X": x}, ["Y"])["Y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _nearest_floor(x, scales):
    """Resize-10 / Upsample nearest in NumPy: out[i] = x[floor(i / scale)] on every axis."""
    for a, s in enumerate(scales):
        n_out = int(np.floor(x.shape[a] * np.float32(s)))
        idx = np.minimum(np.floor(np.arange(n_out, dtype=np.float32) / np.float32(s)), x.shape[a] - 1)
        x = np.take(x, idx.astype(np.int64), axis=a)
    return x


def test_resize_10_and_upsample_nearest(rng):
    x = rng.normal(size=(1, 2, 3, 5)).astype(np.float32)
    for opset, op, scales in ((10, "Resize", [1, 1, 2, 1.5]), (9, "Upsample", [1, 1, 3, 2]),
                              (10, "Resize", [1, 1, 0.7, 2.6])):
        proto = _model(opset, x.shape, None, dict(mode="nearest"), op=op, consts=[np.array(scales, np.float32)])
        np.testing.assert_array_equal(run_inference(proto, {"X": x}, ["Y"])["Y"], _nearest_floor(x, scales))


def test_upsample_linear_is_refused_as_popart_does(rng):
    proto = _model(9, (1, 1, 2, 2), None, dict(mode="linear"), op="Upsample",
                   consts=[np.array([1, 1, 2, 2], np.float32)])
    with pytest.raises(popart.popart_exception, match="Upsample op only supports the mode 'nearest'"):
        run_inference(proto, {"X": np.zeros((1, 1, 2, 2), np.float32)}, ["Y"])


@pytest.mark.parametrize("attrs,match", [
    (dict(mode="linear", exclude_outside=1), "Unsupported value '1' for attribute 'exclude_outside'"),
    (dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize"),
     "Unsupported coordinate transformation mode 'tf_crop_and_resize'"),
    (dict(mode="area"), "Unrecognised resize mode 'area'"),
    (dict(mode="nearest", nearest_mode="banker"), "Unrecognised resize nearest mode 'banker'"),
])
def test_resize_attributes_popart_refuses(attrs, match):
    proto = _model(11, (1, 1, 2, 2), None, attrs, consts=[NO_ROI, np.array([1, 1, 2, 2], np.float32)])
    with pytest.raises(popart.popart_exception, match=match):
        run_inference(proto, {"X": np.zeros((1, 1, 2, 2), np.float32)}, ["Y"])
