"""float16 inside Numba kernels.

Numba has no CPU float16, so half data is viewed as a record of uint16 bits (`types.HALF_STORAGE`).
`load(view, i)` and `store(view, i, x)` work on any typed view of tile memory: on half views they
convert to and from float32 with round-to-nearest-even (IEEE 754, as the IPU's f32->f16 conversion);
on the other views they index directly. Kernels written with them are generic over element types
and Numba specialises them per view type (and caches each specialisation).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import overload

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
    if x != x:
        return np.uint16(0x7E00)
    sign = 0
    if x < 0.0 or (x == 0.0 and math.copysign(1.0, x) < 0.0):
        sign = 0x8000
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
