"""ScaledAdd: data = a * data + b * deltas, in place (popops ScaledAddSupervisor / aXPlusbY).

data and deltas share a type, or mix float32 and float16 as poplibs' mixed ScaledAdd vertices do
(popops::scaledAddTo: data half with deltas float, data float with deltas half); the arithmetic is
float32 and the result is rounded once to data's type."""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

import ipu
from ipu import IN, INOUT, Codelet, Field, load, store

from ._borrow import piece
from ._kernels import from_f32, to_f32

_FLOATS = (ipu.FLOAT32, ipu.FLOAT16)


def _axpby(d, x, n, a, b):  # pragma: no cover - replaced by the Numba overload
    """d[:n] = a * d + b * x (a == 1: d + b * x), in float32 arithmetic, stored in d's type."""
    raise NotImplementedError


def _axpby_f32(dd, xx, n, a, b):
    """dd[:n] = a * dd + b * xx on float32 runs (a == 1: dd + b * xx)."""
    if a == 1.0:
        for i in range(n):
            dd[i] = dd[i] + b * xx[i]
    else:
        for i in range(n):
            dd[i] = a * dd[i] + b * xx[i]


_axpby_f32_jit = njit(inline="always")(_axpby_f32)


@overload(_axpby)
def _axpby_ov(d, x, n, a, b):
    # float16 is stored as a record of uint16 bits: the half side(s) are widened and narrowed in
    # whole runs (ipu.half), ~1 ns an element
    d_half = isinstance(d.dtype, types.Record)
    x_half = isinstance(x.dtype, types.Record)
    if d_half and x_half:
        def impl(d, x, n, a, b):
            dd = to_f32(d, n)
            _axpby_f32_jit(dd, to_f32(x, n), n, a, b)
            from_f32(dd, d, n)
        return impl
    if d_half:  # half data, float deltas
        def impl_hf(d, x, n, a, b):
            dd = to_f32(d, n)
            _axpby_f32_jit(dd, x, n, a, b)
            from_f32(dd, d, n)
        return impl_hf
    if x_half:  # float data, half deltas
        def impl_fh(d, x, n, a, b):
            _axpby_f32_jit(d, to_f32(x, n), n, a, b)
        return impl_fh

    def impl2(d, x, n, a, b):
        if a == 1.0:
            for i in range(n):
                store(d, i, load(d, i) + b * load(x, i))
        else:
            for i in range(n):
                store(d, i, a * load(d, i) + b * load(x, i))
    return impl2


@njit(cache=True)
def _scaled_add(views, off, cnt, fp, ip):
    data = views[F.data]
    deltas = views[F.deltas]
    for v in range(off.shape[0]):
        n = cnt[v, F.data]
        _axpby(piece(data, off[v, F.data], n), piece(deltas, off[v, F.deltas], n), n, np.float32(fp[v, FP.a]),
               np.float32(fp[v, FP.b]))


def scaled_add_cycles(n: np.ndarray, itemsize: int, is_float: bool, axpby: np.ndarray, workers: int = 6,
                      delta_itemsize: int | None = None) -> np.ndarray:
    """Tile cycles of one ScaledAdd supervisor vertex over n elements (constant scales, not memory
    constrained); `delta_itemsize` is the deltas' element size when it differs from data's.

    Source: poplibs lib/popops/PerformanceEstimation.cpp @ 03953b1c,
    getScaledArithmeticSupervisorCycleEstimate:
    - float/half: the elements are cut into 64-bit vectors (2 floats, 4 halves); every worker
      takes totalVectors / 6 of them and the n % vectorWidth elements left over go to the worker
      whose id is totalVectors % 6 (the vectors of totalVectors % 6 are not dealt out: poplibs
      adds `remainingVectors < 0`, always false). Supervisor: 21 + 6 (ScaledPtr64 operand, the
      layout poplibs' own ScaledAddModelling assumes) + 11 (basicOpSupervisorOverhead) + 7 (no
      leftover) or 13 + 12. Worker: 15 prologue + (6 + 3 x (vectors - 1) when it has vectors) + 2
      (worker id test) + on the leftover worker 1 + (8 for a last float; 5, +7 for two halves, +6
      for a third) + 1 exit. Vertex = supervisor + 6 x the slowest worker.
    - aXPlusbY (a != 1) on float: the float aX+bY worker: 16 prologue + (6 + 3 x (vectors - 1))
      + on the leftover worker 1 + (5 for a last float) + 1 (no worker id test); half aX+bY uses the
      ScaledAdd worker above.
    - mixed types (same function): data float with deltas half takes the float path with an inner
      loop of 4 cycles a vector instead of 3; data half with deltas float has its own worker:
      16 prologue + (8 + 4 x (vectors - 1)), where the first totalVectors % 6 workers take one
      vector more, + 2 + on the leftover worker 1 + (2 + 5 for two halves left + 2 + 7 for an odd
      one); the vector width is data's (4 halves).
    - int: no worker split, the supervisor loops 3 elements at a time: 53 + 26 x (n / 3) + 6
      (+ 26 x (n % 3) when n % 3 != 0) + 8.
    Checked against Graphcore's published Mk2 hardware measurements (375 / 467 / 665 / 1043 cycles
    for 64 / 128 / 256 / 512 floats including ~96 probe cycles): 279 / 369 / 567 / 945 here.
    """
    n = np.asarray(n, np.int64)
    axpby = np.broadcast_to(np.asarray(axpby, bool), n.shape)
    if not is_float:
        return 53 + 26 * (n // 3) + 6 + np.where(n % 3 != 0, 26 * (n % 3), 0) + 8
    vw = 8 // itemsize
    total_vectors = n // vw
    left = n % vw
    vpw = total_vectors // workers
    supervisor = 21 + 6 + 11 + np.where(left == 0, 7, 13) + 12
    mixed = delta_itemsize is not None and delta_itemsize != itemsize
    if mixed and itemsize == 2:  # half data, float deltas
        extra = total_vectors % workers
        busiest = vpw + (extra > 0)
        loop = np.where(busiest > 0, 8 + 4 * np.maximum(busiest - 1, 0), 0)
        tail = np.where(left > 0, 2 + np.where(left >= 2, 5, 0) + 2 + np.where(left % 2 == 1, 7, 0), 0)
        # the worker with the leftover elements has id extra: it has vpw vectors when extra > 0
        left_worker = 16 + np.where(vpw > 0, 8 + 4 * np.maximum(vpw - 1, 0), 0) + 2 + 1 + tail + 1
        other = 16 + loop + 2 + 1
        return supervisor + workers * np.maximum(left_worker, other)
    inner = 4 if mixed else 3
    loop = np.where(vpw > 0, 6 + inner * np.maximum(vpw - 1, 0), 0)
    if itemsize == 4:
        tail = np.where(left > 0, 8, 0)
    else:
        tail = np.where(left > 0, 5, 0) + np.where(left >= 2, 7, 0) + np.where(left == 3, 6, 0)
    # the leftover worker (id totalVectors % 6 < 6) always exists, so it is the slowest
    add_worker = 15 + loop + 2 + 1 + tail + 1
    if itemsize == 4:
        axpby_worker = 16 + loop + 1 + np.where(left > 0, 5, 0) + 1
        worker = np.where(axpby, axpby_worker, add_worker)
    else:
        worker = add_worker
    return supervisor + workers * worker


@ipu.register
class ScaledAdd(Codelet):
    name = "ScaledAdd"
    fields = (Field("data", INOUT), Field("deltas", IN))
    float_params = ("a", "b")
    supervisor = True
    allowed_types = ((*_FLOATS, ipu.INT32), (*_FLOATS, ipu.INT32))
    poplibs_vertices = ("popops::ScaledAddSupervisor", "popops::ScaledAdd")

    def kernel(self):
        return _scaled_add

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if t.type.data != t.type.deltas and not (t.type.data in _FLOATS and t.type.deltas in _FLOATS):
            raise TypeError(f"ScaledAdd: data is {t.type.data.name} but deltas is {t.type.deltas.name}; poplibs' "
                            f"ScaledAdd mixes only float32 and float16")
        if np.any(t.count.data != t.count.deltas):
            raise ValueError("ScaledAdd: data and deltas must have the same number of elements")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        return scaled_add_cycles(t.count.data, t.type.data.itemsize, t.type.data.is_float, t.a != 1.0,
                                 target.worker_contexts, t.type.deltas.itemsize)

    def calibration_vertex(self, vertex, types, n, params):
        op = params.get("op", "ADD")  # AXPLUSBY: data = a * data + b * deltas with a != 1
        if op not in ("ADD", "AXPLUSBY"):
            raise KeyError(f"ScaledAdd op {op!r} (ADD or AXPLUSBY)")
        (t,) = types
        return ipu.Vertex({"data": t, "deltas": t}, {"data": n, "deltas": n},
                          {"a": 1.0 if op == "ADD" else 0.5, "b": 1.0})

    def code_bytes(self, types):
        # the float/half supervisor + worker assembly of popops ScaledAdd is ~ 0.5 KiB
        return 512

    def reference(self, data, deltas, a=1.0, b=1.0):
        if data.dtype.kind == "f":
            f32 = np.float32
            return (f32(a) * data.astype(f32) + f32(b) * deltas.astype(f32)).astype(data.dtype)
        if data.dtype.kind == "i":
            return (a * data.astype(np.float64) + b * deltas).astype(data.dtype)
        return (np.float32(a) * data + np.float32(b) * deltas).astype(data.dtype)


F, FP = ScaledAdd.F, ScaledAdd.FP  # the kernel's columns, by name
