"""Numba helpers shared by the codelet kernels: choosing code by element type at compile time.

A kernel is compiled once per combination of view types. Code that only makes sense for some
element types (transcendental maths for floats, wrapping arithmetic for integers) is selected
while Numba types the kernel, through `@overload`, so each specialisation compiles only the
branches it can run.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
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


# ------------------------------------------------------------------------------------------------
# fast float16 <-> float32 conversion of whole runs (bit manipulation, no per-element frexp/ldexp);
# the same values as ipu.half's load/store: exact widening, round-to-nearest-even narrowing,
# overflow to inf, NaN -> 0x7E00.

_P112 = np.float32(2.0 ** 112)


@njit(cache=True)
def half_bits_to_f32(hb, out):
    """out[i] = the float16 whose bits are hb[i] (uint16), exactly."""
    ob = out.view(np.uint32)
    n = hb.shape[0]
    for i in range(n):
        ob[i] = (np.uint32(hb[i]) & np.uint32(0x7FFF)) << np.uint32(13)
    for i in range(n):
        out[i] *= _P112  # rebias the exponent 15 -> 127; half subnormals become float32 normals
    for i in range(n):
        h = np.uint32(hb[i])
        extra = (h & np.uint32(0x8000)) << np.uint32(16)
        if (h & np.uint32(0x7FFF)) >= np.uint32(0x7C00):
            extra |= np.uint32(0x7F800000)  # inf / NaN keep their payload
        ob[i] |= extra


@njit(cache=True)
def f32_to_half_bits(t, hb):
    """hb[i] = bits of t[i] rounded to float16 (nearest even; overflow -> inf; NaN -> 0x7E00)."""
    tb = t.view(np.uint32)
    for i in range(t.shape[0]):
        u = np.uint32(tb[i])
        a = u & np.uint32(0x7FFFFFFF)
        sign = (u >> np.uint32(16)) & np.uint32(0x8000)
        if a >= np.uint32(0x47800000):  # >= 65536, inf or NaN
            h = np.uint32(0x7E00) if a > np.uint32(0x7F800000) else (np.uint32(0x7C00) | sign)
        elif a < np.uint32(0x38800000):  # below 2**-14: half subnormal or zero
            h = np.uint32(np.rint(abs(np.float64(t[i])) * 16777216.0)) | sign
        else:
            odd = (a >> np.uint32(13)) & np.uint32(1)
            h = ((a - np.uint32(0x38000000) + np.uint32(0xFFF) + odd) >> np.uint32(13)) | sign
        hb[i] = h


def to_f32(x, n):  # pragma: no cover - replaced by the Numba overload
    """A new float32 array holding the first n elements of view x (float16 widened exactly)."""
    raise NotImplementedError


@overload(to_f32)
def _to_f32(x, n):
    if isinstance(x.dtype, types.Record):
        def impl(x, n):
            t = np.empty(n, np.float32)
            half_bits_to_f32(x[:n].view(np.uint16), t)
            return t
        return impl

    def impl2(x, n):
        t = np.empty(n, np.float32)
        for i in range(n):
            t[i] = x[i]
        return t
    return impl2


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
