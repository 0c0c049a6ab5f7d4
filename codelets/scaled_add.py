"""ScaledAdd: data = a * data + b * deltas, in place (popops ScaledAddSupervisor / aXPlusbY)."""
from __future__ import annotations

import numpy as np
from numba import njit

import ipu
from ipu import INOUT, IN, Codelet, Field, load, store

from ._costs import worker_split

_FLOATS = (ipu.FLOAT32, ipu.FLOAT16)


@njit(cache=True)
def _scaled_add(views, off, cnt, fp, ip):
    data = views[0]
    deltas = views[1]
    for v in range(off.shape[0]):
        n = cnt[v, 0]
        d = data[off[v, 0]:off[v, 0] + n]
        x = deltas[off[v, 1]:off[v, 1] + n]
        a = np.float32(fp[v, 0])
        b = np.float32(fp[v, 1])
        if a == 1.0:
            for i in range(n):
                store(d, i, load(d, i) + b * load(x, i))
        else:
            for i in range(n):
                store(d, i, a * load(d, i) + b * load(x, i))


def scaled_add_cycles(n: np.ndarray, itemsize: int, is_float: bool, axpby: np.ndarray, workers: int = 6) -> np.ndarray:
    """Tile cycles of one ScaledAdd supervisor vertex over n elements.

    Source: poplibs popopsCycleEstimators.cpp, ScaledAddSupervisor (float/half, data and deltas of
    one type, not memory constrained): the supervisor splits the elements over 6 workers in 64-bit
    atoms; a worker costs a 15-cycle prologue, 6 + 3 cycles per further 64-bit vector in the inner
    loop, 2 cycles to check its remainder, the remainder itself (8 cycles for a last float; 5, +7,
    +6 for 1-3 trailing halves) and 1 to exit; the vertex costs 9 supervisor cycles plus 6 x the
    slowest worker. This reproduces the published poplibs estimate of 279 / 369 / 567 / 945 cycles
    for 64 / 128 / 256 / 512 floats. aXPlusbY (a != 1) adds 4 supervisor cycles to load a second
    scale (poplibs aXPlusbY estimate: +4 for constant scales). int32: no vector path, 5 cycles per
    element per worker (poplibs ScaledAdd2D int estimate).
    """
    n = np.asarray(n, np.int64)
    extra = np.where(axpby, 4, 0)
    if not is_float:
        per_worker = -(-n // workers)
        return 9 + extra + workers * (15 + 5 * per_worker + 3)
    atom = 8 // itemsize
    count, final, rem = worker_split(n, atom, workers)
    vectors = count // atom
    base = 15 + np.where(vectors > 0, 6 + 3 * np.maximum(vectors - 1, 0), 0) + 2 + 1
    if itemsize == 4:
        tail = np.where(final > 0, 8, 0)
    else:
        tail = np.where(final > 0, 5, 0) + np.where(final >= 2, 7, 0) + np.where(final == 3, 6, 0)
    # the worker whose id equals `rem` also does the remainder; poplibs counts ids 0..6 so
    # that worker always exists
    slowest = base + np.where(rem <= workers, 1 + tail, 0)
    return 9 + extra + workers * slowest


@ipu.register
class ScaledAdd(Codelet):
    name = "ScaledAdd"
    fields = (Field("data", INOUT), Field("deltas", IN))
    float_params = ("a", "b")
    supervisor = True
    allowed_types = ((*_FLOATS, ipu.INT32), (*_FLOATS, ipu.INT32))

    def kernel(self):
        return _scaled_add

    def check(self, types, cnt, fp, ip):
        if types[0] != types[1]:
            raise TypeError(f"ScaledAdd: data is {types[0].name} but deltas is {types[1].name}")
        if np.any(cnt[:, 0] != cnt[:, 1]):
            raise ValueError("ScaledAdd: data and deltas must have the same number of elements")

    def cycles(self, types, cnt, fp, ip, target):
        t = types[0]
        return scaled_add_cycles(cnt[:, 0], t.itemsize, t.is_float, fp[:, 0] != 1.0, target.worker_contexts)

    def code_bytes(self, types):
        # the float/half supervisor + worker assembly of popops ScaledAdd is ~ 0.5 KiB
        return 512

    def reference(self, data, deltas, a=1.0, b=1.0):
        if data.dtype == np.float16:
            return (a * data.astype(np.float32) + b * deltas.astype(np.float32)).astype(np.float16)
        if data.dtype.kind == "i":
            return (a * data.astype(np.float64) + b * deltas).astype(data.dtype)
        return (np.float32(a) * data + np.float32(b) * deltas).astype(data.dtype)
