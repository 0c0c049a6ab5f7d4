"""Numba helpers shared by the codelet kernels: choosing code by element type at compile time.

A kernel is compiled once per combination of view types. Code that only makes sense for some
element types (transcendental maths for floats, wrapping arithmetic for integers) is selected
while Numba types the kernel, through `@overload`, so each specialisation compiles only the
branches it can run.
"""
from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload


def kind(nbtype) -> str:
    """'f' for float32/float16 storage, 'i' for integers, 'b' for bool (of a Numba dtype)."""
    if isinstance(nbtype, types.Record):  # float16 is stored as a record of uint16 bits
        return "f"
    if isinstance(nbtype, types.Float):
        return "f"
    if isinstance(nbtype, types.Boolean):
        return "b"
    if isinstance(nbtype, types.Integer):
        return "i"
    raise TypeError(f"no element kind for {nbtype}")


def view_kind(view) -> str:
    return kind(view.dtype)


def int_bounds(view):  # pragma: no cover - replaced by the Numba overload
    """(min, max) of an integer view's element type, as float64 (for saturating conversions)."""
    raise NotImplementedError


@overload(int_bounds, inline="always")
def _int_bounds(view):
    dt = view.dtype
    if isinstance(dt, types.Integer):
        bits = dt.bitwidth
        if dt.signed:
            lo, hi = -float(2 ** (bits - 1)), float(2 ** (bits - 1) - 1)
        else:
            lo, hi = 0.0, float(2 ** bits - 1)
    else:
        lo, hi = -np.inf, np.inf

    def impl(view):
        return lo, hi
    return impl


def convert_store(view, i, x):  # pragma: no cover - replaced by the Numba overload
    """Store number x into element i of a view, converting to the view's element type:
    float -> integer truncates toward zero and saturates to the type's range (NaN -> 0); everything
    else as `ipu.store` (float16 rounds to nearest even, bool is x != 0, integers wrap)."""
    raise NotImplementedError


@overload(convert_store)
def _convert_store(view, i, x):
    from ipu.half import store

    dt = view.dtype
    if isinstance(dt, types.Integer) and isinstance(x, types.Float):
        bits = dt.bitwidth
        lo = -(2 ** (bits - 1)) if dt.signed else 0
        hi = 2 ** (bits - 1) - 1 if dt.signed else 2 ** bits - 1
        flo, fhi = float(lo), float(hi)

        def impl(view, i, x):
            if x != x:
                view[i] = 0
            elif x >= fhi:
                view[i] = hi
            elif x <= flo:
                view[i] = lo
            else:
                view[i] = np.int64(x)
        return impl

    def impl2(view, i, x):
        store(view, i, x)
    return impl2
