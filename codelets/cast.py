"""Cast: out = in converted to out's element type (popops Cast1D).

Fields `in` (IN) and `out` (OUT), any two of the tile memory types (float32, float16, int32,
uint32, int16, uint16, int8, uint8, bool), the same number of elements.

Conversions:
- float -> integer truncates toward zero and saturates to the integer type's range; NaN gives 0
  (the IPU's f32toi32 / f32toui32 conversions saturate; NumPy's astype would be undefined there);
- float32 -> float16 rounds to nearest even (overflow gives inf), float16 -> float32 is exact;
- integer -> float rounds to nearest even; integer -> integer wraps (two's complement), as C
  and NumPy's astype;
- anything -> bool is `x != 0` (NaN is true); bool -> number is 0 / 1.

Cost: poplibs lib/popops/PerformanceEstimation.cpp @ 03953b1c, getCast1DCycleEstimate and
castWorkerCycles (see `cast_cycles`). Cast1D is a MultiVertex: it occupies the tile's 6 workers
and its cycles are tile cycles.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, types
from numba.extending import overload

import ipu
from ipu import IN, OUT, Codelet, Field, load

from ._borrow import piece
from ._costs import ceil_div
from ._kernels import convert_store, from_f32, to_f32


def _cast_apply(x, o, n):  # pragma: no cover - replaced by the Numba overload
    raise NotImplementedError


@overload(_cast_apply)
def _cast_apply_ov(x, o, n):
    half_in = isinstance(x.dtype, types.Record)
    half_out = isinstance(o.dtype, types.Record)
    if half_in and half_out:
        def same(x, o, n):
            for i in range(n):
                o[i] = x[i]
        return same
    if half_in:  # widen the run once, then convert from float32
        def from_half(x, o, n):
            t = to_f32(x, n)
            for i in range(n):
                convert_store(o, i, t[i])
        return from_half
    if half_out and isinstance(x.dtype, types.Float):
        return lambda x, o, n: from_f32(x, o, n)

    def generic(x, o, n):
        for i in range(n):
            convert_store(o, i, load(x, i))
    return generic


@njit(cache=True)
def _cast_kernel(views, off, cnt, fp, ip):
    x = views[F.in_]
    o = views[F.out]
    for v in range(off.shape[0]):
        n = cnt[v, F.out]
        _cast_apply(piece(x, off[v, F.in_], n), piece(o, off[v, F.out], n), n)


_POPLIBS_NAME = {"float32": "FLOAT", "float16": "HALF", "int32": "INT", "uint32": "UNSIGNED_INT",
                 "int16": "SHORT", "uint16": "UNSIGNED_SHORT", "int8": "SIGNED_CHAR",
                 "uint8": "UNSIGNED_CHAR", "bool": "BOOL"}


def cast_worker_cycles(n, t_from, t_to) -> np.ndarray:
    """Cycles of one worker casting n elements: poplibs castWorkerCycles
    (lib/popops/PerformanceEstimation.cpp @ 03953b1c).

    - to 64-bit integers: 3 + n x (4, +1 from int/char/short) (no 64-bit types here, unused);
    - unsigned char -> half (CastFromInt8.S) and half -> 8-bit (CastToInt8.S): 4 cycles, plus 3
      (from unsigned char) or 4 cycles of clamp setup for half -> 8-bit, plus a pipelined loop over
      atoms of 4: fill/drain + (atoms - 1) x loop cycles, and 2 / rem1 / rem2 / rem3 cycles for
      the 0-3 left over (14, 9, 12, 14, 22 from uchar; 19, 16, 14, 21, 29 from half);
    - everything else: 19 prologue cycles + cyclesPerVector per vector of opVectorWidth elements
      + 1 test (+2 if taken) per remainder bit. For float<->half (aux pipeline) opVectorWidth =
      min(2 x elements per 64-bit load, elements per 64-bit store) and cyclesPerVector =
      max(load, store cycles); other conversions (C++ codelets) take 1 element per vector at
      2 cycles (poplibs calls this guess inaccurate for them).
    """
    f, t = _POPLIBS_NAME[t_from.name], _POPLIBS_NAME[t_to.name]
    n = np.asarray(n, np.int64)
    char_float = f == "UNSIGNED_CHAR" and t == "HALF"
    float_char = f == "HALF" and t in ("UNSIGNED_CHAR", "SIGNED_CHAR")
    if char_float or float_char:
        if char_float:
            clamp, atom, fill, loop, r = 0, 4, 14, 9, (12, 14, 22)
        else:
            clamp, atom, fill, loop, r = 4, 4, 19, 16, (14, 21, 29)
        atoms = n // atom
        rem = n % atom
        body = np.where(atoms > 0, fill + (atoms - 1) * loop, 0)
        tail = np.select([rem == 0, rem == 1, rem == 2], [2, r[0], r[1]], r[2])
        return 4 + clamp + body + tail
    aux = f in ("FLOAT", "HALF") and t in ("FLOAT", "HALF")
    from_load = 8 // t_from.itemsize
    to_store = 8 // t_to.itemsize
    op_vw = min(from_load * 2, to_store) if aux else 1
    load_c = op_vw // min(op_vw, from_load)
    store_c = op_vw // min(op_vw, to_store)
    cpv = max(load_c, store_c) + (0 if aux else 1)
    cycles = 19 + cpv * (n // op_vw)
    rem = n % op_vw
    for i in range(int(math.ceil(math.log2(op_vw))) if op_vw > 1 else 0):
        cycles = cycles + 1 + np.where(rem & (1 << i), 2, 0)
    return cycles


def cast_cycles(n, t_from, t_to, workers: int = 6) -> np.ndarray:
    """Tile cycles of one Cast vertex over n elements.

    Source: getCast1DCycleEstimate (poplibs lib/popops/PerformanceEstimation.cpp @ 03953b1c):
    12 supervisor cycles + 6 x (castWorkerCycles of ceil(n / 6) elements + 18 cycles of worker
    entry and exit).
    """
    n = np.asarray(n, np.int64)
    per_worker = ceil_div(n, workers)
    return 12 + workers * (cast_worker_cycles(per_worker, t_from, t_to) + 18)


@ipu.register
class Cast(Codelet):
    """out = in converted to out's type (see the module docstring for the conversion rules)."""

    name = "Cast"
    fields = (Field("in", IN), Field("out", OUT))
    supervisor = True
    poplibs_vertices = ("popops::Cast1D",)

    def kernel(self):
        return _cast_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt)
        if np.any(t.count.in_ != t.count.out):
            raise ValueError("Cast: in and out must have the same number of elements")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt)
        return cast_cycles(t.count.out, t.type.in_, t.type.out, target.worker_contexts)

    def calibration_vertex(self, vertex, types, n, params):
        if len(types) != 2:
            raise KeyError("a cast's dtype is FROM->TO, e.g. float->half")
        return ipu.Vertex(dict(zip(self.field_names, types)), {"in": n, "out": n})

    def code_bytes(self, types):
        # popops Cast1D assembly (float<->half, 8-bit) or C++ worker plus supervisor: ~0.4 KiB
        # (assumption, the order of the other popops element-wise codelets)
        return 384

    def reference(self, x, out_dtype):
        return cast_reference(np.asarray(x), np.dtype(out_dtype))


def cast_reference(x: np.ndarray, out: np.dtype) -> np.ndarray:
    """NumPy: the conversion rules above."""
    if out == np.bool_:
        return x != 0
    if x.dtype.kind == "f" and out.kind in "iu":
        info = np.iinfo(out)
        v = np.trunc(x.astype(np.float64))
        v = np.where(np.isnan(v), 0.0, v)
        v = np.clip(v, float(info.min), float(info.max))
        return v.astype(out)
    if x.dtype.kind in "iub" and out.kind in "iu":
        return x.astype(np.int64).astype(out)  # wraps (two's complement)
    if x.dtype.kind in "iu" and out == np.float16:
        return x.astype(np.float64).astype(np.float16)
    return x.astype(out)


F = Cast.F  # the kernel's columns, by name
