"""float16 inside Numba kernels: the one definition of the conversions.

Numba has no CPU float16, so half data is viewed as a record of uint16 bits (`types.HALF_STORAGE`).
`load(view, i)` and `store(view, i, x)` work on any typed view of tile memory: on half views they
convert to and from float32 with round-to-nearest-even (IEEE 754, as the IPU's f32->f16 conversion);
on the other views they index directly. Kernels written with them are generic over element types
and Numba specialises them per view type (and caches each specialisation).

`half_bits_to_f32` / `f32_to_half_bits` convert whole runs with bit manipulation (what the float16
kernels of the codelets use, ~1 ns per element); they give exactly the values of `load` / `store`.
The rules, as NumPy's `astype` (the codelets' references) and IEEE 754: widening is exact; narrowing
rounds to nearest even, overflows to inf (from 65520 up), keeps the sign of zeros; a NaN stays a
NaN of the same sign, narrowed to the quiet NaN 0x7E00 | sign.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import overload

__all__ = ["f32_to_half_bits", "float_to_half_bits", "half_bits_to_f32", "half_bits_to_float", "load", "store"]

_TWO_M24 = 5.9604644775390625e-08  # 2**-24, the smallest half subnormal


@njit(cache=True)
def half_bits_to_float(h):
    h = np.int32(h)
    e = (h >> 10) & 0x1F
    m = h & 0x3FF
    if e == 0:
        v = np.float32(m * _TWO_M24)
    elif e == 31:
        v = np.float32(np.inf) if m == 0 else np.float32(np.nan)
    else:
        v = np.float32(math.ldexp(np.float64(1024 + m), e - 25))
    if h & 0x8000:
        return -v
    return v


@njit(cache=True)
def float_to_half_bits(x):
    x = np.float64(x)
    sign = 0
    if math.copysign(1.0, x) < 0.0:  # negative numbers, -0.0 and NaNs with the sign bit
        sign = 0x8000
    if x != x:
        return np.uint16(sign | 0x7E00)
    a = abs(x)
    if a >= 65520.0:  # max half is 65504; 65520 is the halfway point that rounds to inf
        return np.uint16(sign | 0x7C00)
    if a < 6.103515625e-05:  # below 2**-14: subnormal (or zero)
        m = np.int64(np.rint(a / _TWO_M24))
        return np.uint16(sign | m)  # m == 1024 encodes the smallest normal, as it should
    mant, ex = math.frexp(a)  # a = mant * 2**ex, mant in [0.5, 1)
    e = ex - 1
    m = np.int64(np.rint((mant * 2.0 - 1.0) * 1024.0))
    if m == 1024:
        m = 0
        e += 1
    if e + 15 >= 31:
        return np.uint16(sign | 0x7C00)
    return np.uint16(sign | ((e + 15) << 10) | m)


_P112 = np.float32(2.0 ** 112)


@njit(cache=True)
def half_bits_to_f32(hb, out):
    """out[i] = the float16 whose bits are hb[i] (uint16), exactly (NaN payloads kept)."""
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
    """hb[i] = bits of t[i] rounded to float16 (nearest even; overflow -> inf; NaN -> 0x7E00 | sign)."""
    tb = t.view(np.uint32)
    for i in range(t.shape[0]):
        u = np.uint32(tb[i])
        a = u & np.uint32(0x7FFFFFFF)
        sign = (u >> np.uint32(16)) & np.uint32(0x8000)
        if a >= np.uint32(0x47800000):  # >= 65536, inf or NaN
            h = (np.uint32(0x7E00) if a > np.uint32(0x7F800000) else np.uint32(0x7C00)) | sign
        elif a < np.uint32(0x38800000):  # below 2**-14: half subnormal or zero
            h = np.uint32(np.rint(abs(np.float64(t[i])) * 16777216.0)) | sign
        else:
            odd = (a >> np.uint32(13)) & np.uint32(1)
            h = ((a - np.uint32(0x38000000) + np.uint32(0xFFF) + odd) >> np.uint32(13)) | sign
        hb[i] = h


def load(view, i):  # pragma: no cover - replaced by the Numba overload
    """Element i of a typed view of tile memory, as a number (half -> float32)."""
    raise NotImplementedError


def store(view, i, x):  # pragma: no cover - replaced by the Numba overload
    """Write x to element i of a typed view of tile memory (float32 -> half rounds to nearest even)."""
    raise NotImplementedError


def _is_half(view) -> bool:
    return isinstance(view.dtype, types.Record)


@overload(load, inline="always")
def _load(view, i):
    if _is_half(view):
        def impl(view, i):
            return half_bits_to_float(view[i]["bits"])
    else:
        def impl(view, i):
            return view[i]
    return impl


@overload(store, inline="always")
def _store(view, i, x):
    if _is_half(view):
        def impl(view, i, x):
            view[i]["bits"] = float_to_half_bits(x)
    elif isinstance(view.dtype, types.Boolean):
        def impl(view, i, x):
            view[i] = x != 0
    elif isinstance(view.dtype, types.Integer) and isinstance(x, types.Float):
        # float -> int conversion truncates toward zero as C does; NaN/inf give 0 rather than UB
        def impl(view, i, x):
            if x != x or x == np.inf or x == -np.inf:
                view[i] = 0
            else:
                view[i] = np.int64(x)
    else:
        def impl(view, i, x):
            view[i] = x
    return impl
