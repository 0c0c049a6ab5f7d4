"""The arithmetic of `ops.interpolate` (ONNX Resize, nearest, linear and cubic): which source
positions feed each output position, and with which weights. The lowering gathers by these
indices; the gradient applies the transposed weights."""
from __future__ import annotations

import numpy as np


# the coordinate transformation and nearest modes PopART's Resize computes (popx/op/resizex.cpp);
# 'tf_crop_and_resize' is in its enum but its opx throws "Unsupported coordinate transformation mode"
COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
# PopART's cubic uses Keys' kernel with a = -0.75 whatever the node's cubic_coeff_a (resizex.cpp, cubicCoeffs)
CUBIC_A = -0.75


def source_coords(out_len: int, in_len: int, scale: float, mode: str) -> np.ndarray:
    """Source coordinate of every output position along one axis (ONNX coordinate_transformation_mode).

    In float32, with PopART's formulas (popx/op/resizex.cpp, coordinateTransformation): the
    coordinates decide which neighbours blend and their weights, so computing them in another
    precision moves results by an ulp where PopART's do not."""
    if mode not in COORDINATE_MODES:
        raise ValueError(f"Unsupported coordinate transformation mode {mode!r}: PopART's Resize takes "
                         f"{', '.join(repr(m) for m in COORDINATE_MODES)}")
    i = np.arange(out_len, dtype=np.float32)
    s = np.float32(scale)
    if mode == "align_corners":
        size = np.float32(in_len) * s  # PopART scales the input length, not the output's
        if size == 1:
            return np.zeros(out_len, np.float32)
        return i * np.float32(in_len - 1) / (size - np.float32(1))
    if mode == "asymmetric":
        return i / s
    if mode == "pytorch_half_pixel" and not np.float32(in_len) * s > 1:
        return np.zeros(out_len, np.float32)
    return (i + np.float32(0.5)) / s - np.float32(0.5)  # half_pixel


def nearest_index(coords: np.ndarray, in_len: int, mode: str) -> np.ndarray:
    """The source index nearest each coordinate (ONNX nearest_mode), clamped to the axis."""
    frac = coords - np.floor(coords)
    if mode == "floor":
        i = np.floor(coords)
    elif mode == "ceil":
        i = np.ceil(coords)
    elif mode == "round_prefer_ceil":
        i = np.where(frac < 0.5, np.floor(coords), np.ceil(coords))
    else:  # round_prefer_floor
        i = np.where(frac <= 0.5, np.floor(coords), np.ceil(coords))
    return np.clip(i, 0, in_len - 1).astype(np.int64)


def linear_neighbours(coords: np.ndarray, in_len: int):
    """(low index, high index, weight of the high one) of each coordinate, as PopART's resizeLinear:
    the floor and ceiling of the coordinate clamped to the axis, weighted by the coordinate's
    fraction (negative coordinates count as 0), in float32."""
    c = np.maximum(np.asarray(coords, np.float32), np.float32(0))
    lo = np.clip(np.floor(c), 0, in_len - 1).astype(np.int64)
    hi = np.clip(np.ceil(c), 0, in_len - 1).astype(np.int64)
    return lo, hi, (c - np.floor(c)).astype(np.float32)


def cubic_taps(coords: np.ndarray, in_len: int):
    """(indices, weights), each (4, len(coords)): the four source positions floor(c) - 1 ..
    floor(c) + 2 of each coordinate, clamped to the axis (PopART pads the axis with its edge
    values), and Keys' cubic convolution weights of the coordinate's fraction r (a = -0.75), in
    float32 as PopART's cubicCoeffs computes them."""
    c = np.asarray(coords, np.float32)
    base = np.floor(c)
    r = (c - base).astype(np.float32)
    a = np.float32(CUBIC_A)
    one = np.float32(1)

    def near(t):  # |t| <= 1
        return ((a + 2) * t - (a + 3)) * t * t + one

    def far(t):  # 1 < |t| < 2
        return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    w = np.stack([far(r + one), near(r), near(one - r), far((one - r) + one)]).astype(np.float32)
    idx = np.clip(base.astype(np.int64)[None, :] + np.arange(-1, 3)[:, None], 0, in_len - 1)
    return idx, w


def axis_matrix(in_len: int, out_len: int, scale: float, attrs: dict) -> np.ndarray:
    """The (out_len, in_len) matrix M with out = M @ in along one axis."""
    coords = source_coords(out_len, in_len, scale, attrs.get("coordinate_transformation_mode", "half_pixel"))
    m = np.zeros((out_len, in_len), np.float64)
    rows = np.arange(out_len)
    if attrs["mode"] == "nearest":
        m[rows, nearest_index(coords, in_len, attrs.get("nearest_mode", "round_prefer_floor"))] = 1.0
        return m
    if attrs["mode"] == "cubic":
        idx, w = cubic_taps(coords, in_len)
        for k in range(4):
            np.add.at(m, (rows, idx[k]), w[k].astype(np.float64))
        return m
    lo, hi, frac = linear_neighbours(coords, in_len)
    np.add.at(m, (rows, lo), 1.0 - frac.astype(np.float64))
    np.add.at(m, (rows, hi), frac.astype(np.float64))
    return m


def reference(x: np.ndarray, out_shape, attrs: dict) -> np.ndarray:
    """NumPy interpolate: each resized axis multiplied by its matrix (in float64)."""
    y = np.asarray(x, np.float64)
    for a, (n_in, n_out, s) in enumerate(zip(x.shape, out_shape, attrs["scale_factor"])):
        if n_in == n_out and s == 1.0:
            continue
        y = np.moveaxis(np.tensordot(axis_matrix(n_in, n_out, s, attrs), np.moveaxis(y, a, 0), axes=1), 0, a)
    return y.astype(x.dtype)
