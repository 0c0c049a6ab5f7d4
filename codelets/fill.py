"""Fill, Copy and Arange: worker vertices that write a run of elements.

Fill:   field `out` (OUT), any type; float parameter `value`, converted to out's type as Cast
        converts (float16 rounds to nearest even, integers truncate toward zero and saturate,
        bool is value != 0; float8 is the value's code, unscaled, NaN on overflow).
Copy:   fields `in` (IN), `out` (OUT) of one type and count; out may be in itself.
Arange: field `out` (OUT), int32; int parameter `start`: out[i] = start + i (wrapping), the
        popops Iota vertex with one region.

All three are worker vertices: the machine schedules up to 6 per tile and their cycles are
thread cycles.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

import ipu
from ipu import IN, OUT, Codelet, Field

from ._borrow import piece
from ._costs import ceil_div, vector_width
from ._kernels import convert_store
from .float8 import FORMATS, encode


def _store_value(view, value):  # pragma: no cover - replaced by the Numba overload
    """view[0] = value in the view's type (float8: the encoded value, NaN on overflow)."""
    raise NotImplementedError


@overload(_store_value)
def _ov_store_value(view, value):
    dt = view.dtype
    if isinstance(dt, types.Record) and next(iter(dt.fields)) in FORMATS:
        f = FORMATS[next(iter(dt.fields))]
        e, m, b, name = f.exponent_bits, f.mantissa_bits, f.bias, f.name

        def impl(view, value):
            view[0][name] = encode(value, 0, e, m, b, True)
        return impl
    return lambda view, value: convert_store(view, 0, value)


@njit(cache=True)
def _fill_kernel(views, off, cnt, fp, ip):
    o = views[FILL_F.out]
    for v in range(off.shape[0]):
        n = cnt[v, FILL_F.out]
        if n == 0:
            continue
        os = piece(o, off[v, FILL_F.out], n)
        _store_value(os, fp[v, FILL_FP.value])
        for i in range(1, n):
            os[i] = os[0]


@njit(cache=True)
def _copy_kernel(views, off, cnt, fp, ip):
    x = views[COPY_F.in_]
    o = views[COPY_F.out]
    for v in range(off.shape[0]):
        n = cnt[v, COPY_F.out]
        a = off[v, COPY_F.in_]
        b = off[v, COPY_F.out]
        if a == b:
            continue  # out is in: nothing to move
        for i in range(n):
            o[b + i] = x[a + i]


@njit(cache=True)
def _arange_kernel(views, off, cnt, fp, ip):
    o = views[ARANGE_F.out]
    for v in range(off.shape[0]):
        n = cnt[v, ARANGE_F.out]
        b = off[v, ARANGE_F.out]
        s = ip[v, ARANGE_IP.start]
        for i in range(n):
            o[b + i] = s + i


def fill_cycles(n, t) -> np.ndarray:
    """Thread cycles of a Fill of n elements of type t.

    Source: poplibs PerformanceEstimation.cpp _fillCycleEstimate (SDK 3.x): 8-bit types
    28 + n / 4 below 64 elements (st32), else 39 + n / 8 (st64); half 15 (n = 1), 21 (n = 2),
    else 26 + n / 4; 32-bit types 16 + n / 2 + 6 + (1 if n % 2 == 1) + 1. 16-bit integers are
    stored like half (derived: same store widths).
    """
    n = np.asarray(n, np.int64)
    size = t.itemsize
    if size == 1:
        return np.where(n < 64, 28 + n // 4, 39 + n // 8)
    if size == 2:
        return np.select([n == 1, n == 2], [15, 21], 26 + n // 4)
    width = 2
    return 16 + n // width + 6 + (n % width == 1) + 1


def copy_cycles(n, t) -> np.ndarray:
    """Thread cycles of a Copy of n elements of type t.

    Source: poplibs popopsCycleEstimators.cpp BroadcastSelectorSelectCycles, a vertex that copies
    a row with LongMemcpy "based on being able to use ld64/st64": 11 + 1 for the vertex, then
    12 + 23 + bytes / 4 + (bytes % 4) x 5 for the row.
    """
    nbytes = np.asarray(n, np.int64) * t.itemsize
    return 12 + 12 + 23 + nbytes // 4 + (nbytes % 4) * 5


def arange_cycles(n, t) -> np.ndarray:
    """Thread cycles of an Arange of n elements. Source: poplibs popopsCycleEstimators.cpp Iota:
    10 + per region 4 + 3 x ceil(n / vectorWidth) (one region)."""
    return 10 + 4 + 3 * ceil_div(n, vector_width(t))


@ipu.register
class Fill(Codelet):
    """out[:] = value."""

    name = "Fill"
    fields = (Field("out", OUT),)
    takes_float8 = True  # the value is encoded (unscaled)
    float_params = ("value",)
    supervisor = False
    poplibs_vertices = ("popops::Fill",)

    def kernel(self):
        return _fill_kernel

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp)
        return fill_cycles(t.count.out, t.type.out)

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        return ipu.Vertex({"out": t}, {"out": n}, {"value": 0.0})

    def code_bytes(self, types):
        # popops Fill assembly (alignment prologue + st64 loop): ~0.2 KiB (assumption)
        return 192

    def reference(self, n, value, dtype):
        from .cast import cast_reference

        return np.broadcast_to(cast_reference(np.array([value], np.float64), np.dtype(dtype)), (n,)).copy()


@ipu.register
class Copy(Codelet):
    """out = in (element copy on one tile)."""

    name = "Copy"
    takes_float8 = True  # moves elements whole, whatever they are
    fields = (Field("in", IN), Field("out", OUT))
    supervisor = False

    def kernel(self):
        return _copy_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt)
        if t.type.in_ != t.type.out:
            raise TypeError(f"Copy: in is {t.type.in_.name} but out is {t.type.out.name}; use Cast to convert")
        if np.any(t.count.in_ != t.count.out):
            raise ValueError("Copy: in and out must have the same number of elements")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt)
        return copy_cycles(t.count.out, t.type.out)

    def code_bytes(self, types):
        # a LongMemcpy-style copy loop: ~0.2 KiB (assumption)
        return 192

    def reference(self, x):
        return np.array(x, copy=True)


@ipu.register
class Arange(Codelet):
    """out[i] = start + i."""

    name = "Arange"
    fields = (Field("out", OUT),)
    int_params = ("start",)
    supervisor = False
    allowed_types = ((ipu.INT32,),)
    poplibs_vertices = ("popops::Iota",)

    def kernel(self):
        return _arange_kernel

    def check(self, types, cnt, fp, ip):
        start = self.table(types, cnt, fp, ip).start
        if start.size and (start.min() < -2 ** 31 or start.max() > 2 ** 31 - 1):
            raise ValueError("Arange: start must fit in int32")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt)
        return arange_cycles(t.count.out, t.type.out)

    def calibration_vertex(self, vertex, types, n, params):
        if types != (ipu.INT32,):
            raise KeyError("Arange writes int32")
        return ipu.Vertex({"out": ipu.INT32}, {"out": n}, {"start": 0})

    def code_bytes(self, types):
        # popops Iota worker code: ~0.1 KiB (assumption)
        return 128

    def reference(self, n, start):
        return (np.arange(n, dtype=np.int64) + start).astype(np.int32)


# the kernels' columns, by name
FILL_F, FILL_FP = Fill.F, Fill.FP
COPY_F = Copy.F
ARANGE_F, ARANGE_IP = Arange.F, Arange.IP
