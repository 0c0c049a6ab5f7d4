"""conv (im2col + planned matmul) and pooling through Session, against NumPy references."""
import numpy as np
import pytest

import popxl.ops as ops

from helpers import run_popxl

RNG = np.random.default_rng(7)


def conv_ref(x, w, stride, pads, dilation, groups):
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + pads[1] + pads[3] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, m, oh, ow), np.float64)
    mg = m // groups
    for g in range(groups):
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg, i * stride[0]:i * stride[0] + dilation[0] * (kh - 1) + 1:dilation[0],
                           j * stride[1]:j * stride[1] + dilation[1] * (kw - 1) + 1:dilation[1]]
                out[:, g * mg:(g + 1) * mg, i, j] = np.einsum("nckl,mckl->nm", patch, w[g * mg:(g + 1) * mg])
    return out


@pytest.mark.parametrize("shape,wshape,stride,pads,dilation,groups", [
    ((1, 3, 5, 5), (4, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 2, 7, 6), (3, 2, 3, 2), (2, 1), (1, 0, 1, 1), (1, 1), 1),
    ((1, 4, 6, 6), (4, 2, 3, 3), (1, 1), (1, 1, 1, 1), (2, 2), 2),
])
def test_conv(shape, wshape, stride, pads, dilation, groups):
    x = RNG.normal(size=shape).astype(np.float32)
    w = RNG.normal(size=wshape).astype(np.float32)
    out, _ = run_popxl(lambda a, b: ops.conv(a, b, stride=stride, padding=pads, dilation=dilation, groups=groups),
                       [x, w])
    np.testing.assert_allclose(out, conv_ref(x, w, stride, pads, dilation, groups), rtol=1e-4, atol=1e-5)


def pool_ref(x, k, stride, pads, kind):
    n, c, h, w = x.shape
    fill = -np.inf if kind == "max" else np.nan
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=fill)
    oh = (h + pads[0] + pads[2] - k[0]) // stride[0] + 1
    ow = (w + pads[1] + pads[3] - k[1]) // stride[1] + 1
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * stride[0]:i * stride[0] + k[0], j * stride[1]:j * stride[1] + k[1]]
            out[:, :, i, j] = win.max((2, 3)) if kind == "max" else np.nanmean(win, (2, 3))
    return out


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("k,stride,pads", [((2, 2), (2, 2), (0, 0, 0, 0)), ((3, 3), (1, 2), (1, 1, 1, 1))])
def test_pools(kind, k, stride, pads):
    x = RNG.normal(size=(2, 3, 7, 5)).astype(np.float32)
    fn = ops.max_pool if kind == "max" else ops.average_pool
    out, _ = run_popxl(lambda a: fn(a, kernel_size=k, stride=stride, padding=pads), [x])
    np.testing.assert_allclose(out, pool_ref(x, k, stride, pads, kind), rtol=1e-5, atol=1e-6)


def conv_transpose_ref(x, w, stride, pads, dilation, groups, out_pad):
    # scatter form: every input element adds w x value to the output window it reaches
    n, c, h, wd = x.shape
    cin, mg, kh, kw = w.shape
    cg = c // groups
    oh = (h - 1) * stride[0] + dilation[0] * (kh - 1) + 1 - pads[0] - pads[2] + out_pad[0]
    ow = (wd - 1) * stride[1] + dilation[1] * (kw - 1) + 1 - pads[1] - pads[3] + out_pad[1]
    full = np.zeros((n, mg * groups, oh + pads[0] + pads[2] + kh * dilation[0], ow + pads[1] + pads[3] + kw * dilation[1]))
    for g in range(groups):
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for b in range(kw):
                        full[:, g * mg:(g + 1) * mg, i * stride[0] + a * dilation[0], j * stride[1] + b * dilation[1]] += \
                            x[:, g * cg:(g + 1) * cg, i, j] @ w[g * cg:(g + 1) * cg, :, a, b]
    return full[:, :, pads[0]:pads[0] + oh, pads[1]:pads[1] + ow]


@pytest.mark.parametrize("shape,wshape,stride,pads,dilation,groups,out_pad", [
    ((1, 2, 4, 4), (2, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1, (0, 0)),
    ((2, 4, 3, 5), (4, 2, 3, 2), (2, 1), (1, 0, 1, 1), (1, 1), 2, (1, 0)),
    ((1, 3, 5, 4), (3, 2, 2, 3), (2, 2), (1, 1, 0, 0), (2, 1), 1, (0, 0)),
])
def test_conv_transpose(shape, wshape, stride, pads, dilation, groups, out_pad):
    x = RNG.normal(size=shape).astype(np.float32)
    w = RNG.normal(size=wshape).astype(np.float32)
    out, _ = run_popxl(lambda a, b: ops.conv_transpose(a, b, stride=stride, padding=pads, dilation=dilation,
                                                       groups=groups, output_padding=out_pad), [x, w])
    np.testing.assert_allclose(out, conv_transpose_ref(x, w, stride, pads, dilation, groups, out_pad),
                               rtol=1e-4, atol=1e-5)


def _resize_ref(x, scales, mode, ctm="half_pixel"):
    out = x.astype(np.float64)
    for a, s in enumerate(scales):
        n_in = out.shape[a]
        n_out = int(n_in * s)
        xo = np.arange(n_out)
        coords = (xo + 0.5) / s - 0.5 if ctm == "half_pixel" else xo / s
        if mode == "nearest":
            idx = np.clip(np.ceil(coords - 0.5), 0, n_in - 1).astype(int)
            out = np.take(out, idx, axis=a)
        else:
            c = np.clip(coords, 0, n_in - 1)
            lo = np.floor(c).astype(int)
            hi = np.minimum(lo + 1, n_in - 1)
            f = (c - lo).reshape([-1 if i == a else 1 for i in range(out.ndim)])
            out = np.take(out, lo, axis=a) * (1 - f) + np.take(out, hi, axis=a) * f
    return out


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [(1.0, 1.0, 2.0, 2.0), (1.0, 1.0, 0.5, 3.0)])
def test_interpolate(mode, scales):
    x = RNG.normal(size=(1, 2, 4, 6)).astype(np.float32)
    out, _ = run_popxl(lambda a: ops.interpolate(a, scales, mode=mode), [x])
    np.testing.assert_allclose(out, _resize_ref(x, scales, mode), rtol=1e-5, atol=1e-6)


def _popart_linear_1d(x, axis, scale, ctm):
    """One axis of PopART's resizeLinear (popx/op/resizex.cpp), written out in float32: the
    coordinate, its floor / ceiling neighbours and weights, then mul, mul, add on the device."""
    f32 = np.float32
    n_in = x.shape[axis]
    n_out = int(np.floor(n_in * scale))
    i = np.arange(n_out, dtype=f32)
    if ctm == "align_corners":
        size = f32(n_in) * f32(scale)
        c = i * f32(n_in - 1) / (size - f32(1))
    else:
        c = (i + f32(0.5)) / f32(scale) - f32(0.5)
    c = np.maximum(c, f32(0))
    lo = np.clip(np.floor(c), 0, n_in - 1).astype(int)
    hi = np.clip(np.ceil(c), 0, n_in - 1).astype(int)
    w = (c - np.floor(c)).astype(f32).reshape([-1 if k == axis else 1 for k in range(x.ndim)])
    return np.take(x, lo, axis=axis) * (f32(1) - w) + np.take(x, hi, axis=axis) * w


@pytest.mark.parametrize("shape,scales,ctm", [
    ((10, 10, 10), (1.0, 1.0, 0.3), "half_pixel"),       # PopXL's own test: 1e-7 against torch
    ((2, 7, 5), (1.0, 1.7, 2.5), "half_pixel"),
    ((1, 3, 5), (1.0, 1.0, 2.6), "align_corners"),       # the scaled input length, not the output's
])
def test_interpolate_linear_is_popart_float32_arithmetic_bit_for_bit(shape, scales, ctm):
    x = RNG.normal(size=shape).astype(np.float32)
    out, _ = run_popxl(lambda a: ops.interpolate(a, scales, mode="linear", coordinate_transformation_mode=ctm), [x])
    want = x
    for a, s in enumerate(scales):
        if s != 1.0:
            want = _popart_linear_1d(want, a, s, ctm)
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("shape,scales,ctm,align", [
    ((1, 2, 5, 4), (1.0, 1.0, 2.0, 3.0), "pytorch_half_pixel", False),
    ((2, 1, 6, 7), (1.0, 1.0, 0.5, 1.5), "pytorch_half_pixel", False),
    ((1, 3, 4, 5), (1.0, 1.0, 2.5, 1.0), "align_corners", True),
])
def test_interpolate_cubic_against_pytorch_bicubic(shape, scales, ctm, align):
    """PopART's cubic Resize (Keys' kernel, a = -0.75, neighbours clamped to the edges) is
    PyTorch's bicubic upsampling."""
    torch = pytest.importorskip("torch")
    x = RNG.normal(size=shape).astype(np.float32)
    out, _ = run_popxl(lambda a: ops.interpolate(a, scales, mode="cubic", coordinate_transformation_mode=ctm), [x])
    want = torch.nn.functional.interpolate(torch.from_numpy(x), scale_factor=scales[2:], mode="bicubic",
                                           align_corners=align).numpy()
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_interpolate_refuses_what_popart_does_not_compute():
    x = np.zeros((1, 1, 2, 2), np.float32)
    with pytest.raises(ValueError, match="Unsupported coordinate transformation mode 'tf_crop_and_resize'"):
        run_popxl(lambda a: ops.interpolate(a, (1.0, 1.0, 2.0, 2.0), mode="linear",
                                            coordinate_transformation_mode="tf_crop_and_resize"), [x])
    with pytest.raises(ValueError, match="Unrecognised resize nearest mode 'nearest'"):
        run_popxl(lambda a: ops.interpolate(a, (1.0, 1.0, 2.0, 2.0), nearest_mode="nearest"), [x])
