"""Element helpers shared by the indexing / row-wise codelets (usable inside Numba kernels).

`copy_elem(dst, i, src, j)` copies one element between two views of the same element type bit
for bit (float16 is a record of uint16 bits, so a load/store round trip through float32 would
lose NaN payloads; float8 is a record of one byte); `fill_zero(view, start, n)` writes zeros.
"""
from __future__ import annotations

from numba import njit, types
from numba.extending import overload


def copy_elem(dst, i, src, j):  # pragma: no cover - replaced by the Numba overload
    raise NotImplementedError


def _field(rec) -> str:
    """The one field of a record element type: `bits` (float16), `float8_143` / `float8_152`."""
    return next(iter(rec.fields))


@overload(copy_elem, inline="always")
def _copy_elem(dst, i, src, j):
    if isinstance(dst.dtype, types.Record):
        f = _field(dst.dtype)

        def impl(dst, i, src, j):
            dst[i][f] = src[j][f]
    else:
        def impl(dst, i, src, j):
            dst[i] = src[j]
    return impl


def zero_elem(dst, i):  # pragma: no cover - replaced by the Numba overload
    raise NotImplementedError


@overload(zero_elem, inline="always")
def _zero_elem(dst, i):
    if isinstance(dst.dtype, types.Record):  # +0 in float16 and in both float8 formats
        f = _field(dst.dtype)

        def impl(dst, i):
            dst[i][f] = 0
    elif isinstance(dst.dtype, types.Boolean):
        def impl(dst, i):
            dst[i] = False
    else:
        def impl(dst, i):
            dst[i] = 0
    return impl


@njit(inline="always", cache=True)
def fill_zero(view, start, n):
    for k in range(n):
        zero_elem(view, start + k)
