"""interpolate (ONNX Resize, nearest and linear): static index gathers, so the exchange does
the work; linear blends two gathered neighbours per scaled axis."""
from __future__ import annotations

import numpy as np

import ipu

from .. import blocks as B
from .shape import materialise
from ..registry import lowering_rule
from ...ops._interpolation import linear_neighbours, nearest_index, source_coords


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
    if mode == "cubic":
        raise NotImplementedError(f"{op.name}: interpolate mode 'cubic' is not supported by the simulator; "
                                  f"use 'nearest' or 'linear'")
    cur = x
    for a, (n_in, n_out, s) in enumerate(zip(x.shape, t_out.shape, scales)):
        if n_in == n_out and s == 1.0:
            continue
        coords = source_coords(n_out, n_in, s, ctm)
        if mode == "nearest":
            cur = _take(cur, a, nearest_index(coords, n_in, op.attrs.get("nearest_mode", "round_prefer_floor")))
            continue
        lo, hi, frac = linear_neighbours(coords, n_in)
        shape = [1] * x.rank
        shape[a] = n_out
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

