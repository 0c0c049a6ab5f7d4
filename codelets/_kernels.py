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

from ipu.half import f32_to_half_bits, half_bits_to_f32, store


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


def convert_store(view, i, x):  # pragma: no cover - replaced by the Numba overload
    """Store number x into element i of a view, converting to the view's element type:
    float -> integer truncates toward zero and saturates to the type's range (NaN -> 0); everything
    else as `ipu.store` (float16 rounds to nearest even, bool is x != 0, integers wrap)."""
    raise NotImplementedError


@overload(convert_store)
def _convert_store(view, i, x):
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


# ------------------------------------------------------------------------------------------------
# float16 <-> float32 of whole runs, by ipu.half's run converters


def widen_into(x, n, out):  # pragma: no cover - replaced by the Numba overload
    """out[:n] = the first n elements of view x as float32 (float16 widened exactly)."""
    raise NotImplementedError


@overload(widen_into)
def _widen_into(x, n, out):
    if isinstance(x.dtype, types.Record):
        def impl(x, n, out):
            half_bits_to_f32(x[:n].view(np.uint16), out[:n])
        return impl

    def impl2(x, n, out):
        for i in range(n):
            out[i] = x[i]
    return impl2


def to_f32(x, n):  # pragma: no cover - replaced by the Numba overload
    """A new float32 array holding the first n elements of view x (float16 widened exactly)."""
    raise NotImplementedError


@overload(to_f32)
def _to_f32(x, n):
    def impl(x, n):
        t = np.empty(n, np.float32)
        widen_into(x, n, t)
        return t
    return impl


def from_f32(t, o, n):  # pragma: no cover - replaced by the Numba overload
    """Store the first n float32 values of t into view o (float16 rounds to nearest even)."""
    raise NotImplementedError


@overload(from_f32)
def _from_f32(t, o, n):
    if isinstance(o.dtype, types.Record):
        def impl(t, o, n):
            f32_to_half_bits(t[:n], o[:n].view(np.uint16))
        return impl

    def impl2(t, o, n):
        for i in range(n):
            o[i] = t[i]
    return impl2


def half_scratch(view, size):  # pragma: no cover - replaced by the Numba overload
    """float32 scratch of `size` elements for a kernel whose `view` is float16 (its values are
    widened into it), made once per kernel call; an empty array for other types."""
    raise NotImplementedError


@overload(half_scratch)
def _half_scratch_ov(view, size):
    if isinstance(view.dtype, types.Record):
        return lambda view, size: np.empty(size, np.float32)
    return lambda view, size: np.empty(0, np.float32)
