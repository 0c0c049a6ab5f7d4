"""Select (where) and Clamp: worker vertices.

Select: fields `cond` (IN, bool), `a` (IN), `b` (IN), `out` (OUT); out[i] = a[i] if cond[i] else
        b[i]. a, b and out share one type (float32, float16, int32, bool); a and b may each have a
        single element (a broadcast scalar), cond has out's count. Elements are copied bit for
        bit. out may be a or b itself.
Clamp:  fields `in` (IN), `out` (OUT) of one type (float32, float16, int32); float parameters
        `lo`, `hi`: out = min(max(in, lo), hi). Floats are clamped in float32 (float16 rounded
        once afterwards) and NaN stays NaN; for int32, lo and hi are first converted to int32
        (truncated toward zero, saturating; +-inf are no bound). lo and hi must not be NaN.

Costs: poplibs SDK 3.x popopsCycleEstimators.cpp Select / BroadcastSelect / Clamp (see
`select_cycles`, `clamp_cycles`). Both are worker vertices: cycles are thread cycles.
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

import ipu
from ipu import IN, OUT, Codelet, Field

from ._borrow import piece
from ._costs import vector_width
from ._kernels import from_f32, to_f32


@njit(cache=True)
def _select_kernel(views, off, cnt, fp, ip):
    c = views[SF.cond]
    a = views[SF.a]
    b = views[SF.b]
    o = views[SF.out]
    for v in range(off.shape[0]):
        n = cnt[v, SF.out]
        oc = off[v, SF.cond]
        oa = off[v, SF.a]
        ob = off[v, SF.b]
        oo = off[v, SF.out]
        sa = 1 if cnt[v, SF.a] == n else 0
        sb = 1 if cnt[v, SF.b] == n else 0
        for i in range(n):
            if c[oc + i]:
                o[oo + i] = a[oa + i * sa]
            else:
                o[oo + i] = b[ob + i * sb]


@njit(cache=True)
def _clamp_kernel(views, off, cnt, fp, ip):
    x = views[CF.in_]
    o = views[CF.out]
    for v in range(off.shape[0]):
        n = cnt[v, CF.out]
        xs = piece(x, off[v, CF.in_], n)
        os = piece(o, off[v, CF.out], n)
        _clamp_run(xs, os, n, fp[v, CFP.lo], fp[v, CFP.hi])


@njit(cache=True)
def _clamp_float(xs, os, n, lo, hi):
    lo32 = np.float32(lo)
    hi32 = np.float32(hi)
    t = to_f32(xs, n)
    for i in range(n):
        v = t[i]
        if v < lo32:
            v = lo32
        if v > hi32:
            v = hi32
        t[i] = v
    from_f32(t, os, n)


@njit(cache=True)
def _clamp_int(xs, os, n, lo, hi):
    ilo = np.int64(-2 ** 31) if lo <= -2.0 ** 31 else np.int64(lo)
    ihi = np.int64(2 ** 31 - 1) if hi >= 2.0 ** 31 - 1 else np.int64(hi)
    for i in range(n):
        v = np.int64(xs[i])
        if v < ilo:
            v = ilo
        if v > ihi:
            v = ihi
        os[i] = v


def _clamp_run(xs, os, n, lo, hi):  # pragma: no cover - replaced by the Numba overload
    raise NotImplementedError


@overload(_clamp_run)
def _clamp_run_ov(xs, os, n, lo, hi):
    if isinstance(xs.dtype, (types.Record, types.Float)):
        return lambda xs, os, n, lo, hi: _clamp_float(xs, os, n, lo, hi)
    return lambda xs, os, n, lo, hi: _clamp_int(xs, os, n, lo, hi)


def select_cycles(n, t, scalar_a, scalar_b) -> np.ndarray:
    """Thread cycles of one Select vertex over n elements of type t.

    Source: poplibs popopsCycleEstimators.cpp. Select (one region): 5 + 6 + 5 x n ("ld in1,
    ld in2, ld in3, movz, st" per element). BroadcastSelect (a and b both scalars): 9 + 1 +
    for 4-byte types 5 + 4n + 3; half 23 + 4n (n odd) or 30 + 4n (even, misaligned worst case);
    bool 40 + (n / 4) x 17 + 26. One scalar operand: costed as Select (derived).
    """
    n = np.asarray(n, np.int64)
    full = 5 + 6 + 5 * n
    size = t.itemsize
    if size == 4:
        bc = 10 + 5 + 4 * n + 3
    elif size == 2:
        bc = 10 + np.where(n % 2 == 1, 23, 30) + 4 * n
    else:
        bc = 10 + 40 + (n // 4) * 17 + 26
    return np.where(np.asarray(scalar_a) & np.asarray(scalar_b), bc, full)


def clamp_cycles(n, t) -> np.ndarray:
    """Thread cycles of one Clamp vertex over n elements of type t.

    Source: poplibs popopsCycleEstimators.cpp Clamp / BroadcastClamp (one region; a further region of
    a multi-region vertex costs all but the 5, Clamp.vertex_overhead_cycles): 5 + 6 +
    basicOpLoopCycles(n, vectorWidth, cyclesPerVector) = cyclesPerVector x (n + vectorWidth - 1) /
    vectorWidth (integer arithmetic, multiplied first), with float 2 per vector of 2, half 2 per
    vector of 4, int 7 per element ("ld, ld, ld, cmp, movz, cmp, st").
    """
    n = np.asarray(n, np.int64)
    if t == ipu.INT32:
        return 5 + 6 + 7 * n
    # basicOpLoopCycles multiplies before it divides: 2 x (n + vw - 1) / vw in integers
    vw = vector_width(t)
    return 5 + 6 + 2 * (n + vw - 1) // vw


_SEL_TYPES = (ipu.FLOAT32, ipu.FLOAT16, ipu.INT32, ipu.BOOL)
_CLAMP_TYPES = (ipu.FLOAT32, ipu.FLOAT16, ipu.INT32)


@ipu.register
class Select(Codelet):
    """out = cond ? a : b, element by element."""

    name = "Select"
    fields = (Field("cond", IN), Field("a", IN), Field("b", IN), Field("out", OUT))
    supervisor = False
    allowed_types = ((ipu.BOOL,), _SEL_TYPES, _SEL_TYPES, _SEL_TYPES)
    poplibs_vertices = ("popops::Select", "popops::BroadcastSelect")

    def kernel(self):
        return _select_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt)
        ta, tb, to = t.type.a, t.type.b, t.type.out
        if not (ta == tb == to):
            raise TypeError(f"Select: a, b and out must have one type, got {ta.name}, {tb.name}, {to.name}")
        n = t.count.out
        if np.any(t.count.cond != n):
            raise ValueError("Select: cond must have out's number of elements")
        for k, f in ((t.count.a, "a"), (t.count.b, "b")):
            if np.any((k != n) & (k != 1)):
                raise ValueError(f"Select: {f} must have out's number of elements or 1 (a broadcast scalar)")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt)
        n = t.count.out
        return select_cycles(n, t.type.out, (t.count.a != n), (t.count.b != n))

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        k = 1 if vertex == "popops::BroadcastSelect" else n
        return ipu.Vertex({"cond": ipu.BOOL, "a": t, "b": t, "out": t}, {"cond": n, "a": k, "b": k, "out": n})

    def code_bytes(self, types):
        # popops Select / BroadcastSelect worker code: ~0.25 KiB (assumption)
        return 256

    def reference(self, cond, a, b):
        return np.where(np.asarray(cond, bool), a, b)


@ipu.register
class Clamp(Codelet):
    """out = min(max(in, lo), hi)."""

    name = "Clamp"
    fields = (Field("in", IN), Field("out", OUT))
    float_params = ("lo", "hi")
    supervisor = False
    multi_region = True  # popops Clamp / BroadcastClamp: vectors of regions (2D vertices)
    allowed_types = (_CLAMP_TYPES, _CLAMP_TYPES)
    poplibs_vertices = ("popops::Clamp",)

    def kernel(self):
        return _clamp_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp)
        if t.type.in_ != t.type.out:
            raise TypeError(f"Clamp: in is {t.type.in_.name} but out is {t.type.out.name}")
        if np.any(t.count.in_ != t.count.out):
            raise ValueError("Clamp: in and out must have the same number of elements")
        if np.any(np.isnan(t.lo)) or np.any(np.isnan(t.hi)):
            raise ValueError("Clamp: lo and hi must not be NaN")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp)
        return clamp_cycles(t.count.out, t.type.out)

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        return ipu.Vertex({"in": t, "out": t}, {"in": n, "out": n}, {"lo": 0.0, "hi": 1.0})

    def vertex_overhead_cycles(self, types):
        # popopsCycleEstimators.cpp Clamp: 5 once per vertex, then clampCycles (6 + the loop) a region
        return 5

    def code_bytes(self, types):
        # popops Clamp / BroadcastClamp worker code: ~0.25 KiB (assumption)
        return 256

    def reference(self, x, lo, hi):
        x = np.asarray(x)
        if x.dtype.kind == "f":
            v = x.astype(np.float32)
            lo32, hi32 = np.float32(lo), np.float32(hi)
            r = np.where(v < lo32, lo32, v)
            r = np.where(r > hi32, hi32, r)
            return r.astype(x.dtype)
        ilo = -2 ** 31 if lo <= -2.0 ** 31 else int(np.trunc(lo))
        ihi = 2 ** 31 - 1 if hi >= 2.0 ** 31 - 1 else int(np.trunc(hi))
        r = np.maximum(x.astype(np.int64), ilo)
        return np.minimum(r, ihi).astype(x.dtype)


# the kernels' columns, by name
SF, CF, CFP = Select.F, Clamp.F, Clamp.FP
