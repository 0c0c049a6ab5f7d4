"""interpolate (ONNX Resize, nearest, linear and cubic): static index gathers, so the exchange
does the work; linear blends two gathered neighbours per scaled axis, cubic four (PopART's
resizeLinear / resizeCubic, popx/op/resizex.cpp)."""
from __future__ import annotations

import numpy as np

import ipu

from .. import blocks as B
from .shape import materialise
from ..registry import lowering_rule
from ...ops._interpolation import cubic_taps, linear_neighbours, nearest_index, source_coords


def _take(view: ipu.Tensor, axis: int, idx: np.ndarray) -> ipu.Tensor:
    sel = np.take(view.index(), idx, axis=axis)
    return ipu.Tensor(view.variable, sel, sel.shape)


@lowering_rule("interpolate")
def interpolate(ctx, op):
    x = ctx.value(op.inputs[0])
    t_out = op.outputs[0]
    mode = op.attrs["mode"]
    ctm = op.attrs.get("coordinate_transformation_mode", "half_pixel")
    scales = op.attrs["scale_factor"]
    cur = x
    for a, (n_in, n_out, s) in enumerate(zip(x.shape, t_out.shape, scales)):
        if n_in == n_out and s == 1.0:
            continue
        coords = source_coords(n_out, n_in, s, ctm)
        if mode == "nearest":
            cur = _take(cur, a, nearest_index(coords, n_in, op.attrs.get("nearest_mode", "round_prefer_floor")))
            continue
        shape = [1] * x.rank
        shape[a] = n_out
        if mode == "cubic":
            cur = _cubic_axis(ctx, cur, a, coords, n_in, shape, x.dtype)
            continue
        lo, hi, frac = linear_neighbours(coords, n_in)
        w_hi = ctx.g.add_constant(ctx.name(f"w_hi{a}"), frac.reshape(shape).astype(x.dtype.numpy), x.dtype)
        # 1 - frac in float32, as PopART subtracts its float coefficients from 1 on the device
        w_lo = ctx.g.add_constant(ctx.name(f"w_lo{a}"), (np.float32(1) - frac).reshape(shape).astype(x.dtype.numpy),
                                  x.dtype)
        ctx.tiles.map(ctx.g, w_hi)
        ctx.tiles.map(ctx.g, w_lo)
        a_lo, a_hi = _take(cur, a, lo), _take(cur, a, hi)
        cur = B.binary(ctx, "add", B.binary(ctx, "mul", a_lo, w_lo, shape=a_lo.shape, suffix=f"lo{a}"),
                       B.binary(ctx, "mul", a_hi, w_hi, shape=a_hi.shape, suffix=f"hi{a}"), suffix=f"blend{a}")
    materialise(ctx, t_out, cur, "resize")


def _cubic_axis(ctx, cur, a, coords, n_in, shape, dtype):
    """One axis of a cubic resize: the sum of four gathered neighbours, each times its weights."""
    idx, w = cubic_taps(coords, n_in)
    total = None
    for k in range(4):
        wk = ctx.g.add_constant(ctx.name(f"w{k}_{a}"), w[k].reshape(shape).astype(dtype.numpy), dtype)
        ctx.tiles.map(ctx.g, wk)
        tap = _take(cur, a, idx[k])
        term = B.binary(ctx, "mul", tap, wk, shape=tap.shape, suffix=f"tap{k}_{a}")
        total = term if total is None else B.binary(ctx, "add", total, term, suffix=f"sum{k}_{a}")
    return total
