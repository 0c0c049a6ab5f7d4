"""Data-dependent indexing vertices: MultiSlice, MultiUpdate, DynamicSlice, DynamicUpdate and
EncodeOneHot (the counterparts of popops' MultiSlice / MultiUpdate(Add|Op), DynamicSlice2D /
DynamicUpdateSlice2D and EncodeOneHotCustomValues).

The IPU cannot route data by a run-time value: exchanges are fixed when the program is compiled.
So every vertex here works on a *block* that already sits on its tile: `region` consecutive
columns of every one of `rows` rows of a table, stored row-major (`rows x region` elements).
The lowering broadcasts the (small) run-time offsets to each block's tile and every lookup or
update is then local to that tile, as popops::multiSlice / multiUpdate do.

Out-of-range offsets (negative, or >= rows) never touch memory outside the block:
- MultiSlice writes zeros for them (poplibs leaves such output rows untouched; PopXL documents
  them as garbage unless zero_OOR, and zeros are one valid garbage);
- MultiUpdate skips them (as poplibs' MultiUpdate vertices do);
- DynamicSlice / DynamicUpdate read an offset >= rows as 0 and wrap the slice around the axis
  (poplibs DynamicSlice2D with invalid-index remapping).
`row_base` lets a block hold rows [row_base, row_base + rows) of a larger table.
"""
from __future__ import annotations

from enum import IntEnum

import numpy as np
from numba import njit

import ipu
from ipu import IN, INOUT, OUT, Codelet, Field, load, store

from ._elem import copy_elem, fill_zero, zero_elem



class UpdateOpCode(IntEnum):
    """MultiUpdate's `op` parameter: how an update combines with the element it lands on."""
    ASSIGN = 0
    ADD = 1
    MAX = 2
    MIN = 3
    MUL = 4


# reduction names of the frontends -> code ("none" assigns; "sum" and "add" add)
UPDATE_OPS = {"none": int(UpdateOpCode.ASSIGN), "sum": int(UpdateOpCode.ADD), "add": int(UpdateOpCode.ADD),
              "max": int(UpdateOpCode.MAX), "min": int(UpdateOpCode.MIN), "mul": int(UpdateOpCode.MUL)}

_INDEX_TYPES = (ipu.INT32, ipu.UINT32, ipu.INT16, ipu.UINT16, ipu.INT8, ipu.UINT8)


def _vector_width(t) -> int:
    """Elements per 64-bit vector as poplibs' slice estimators count them:
    dataPathWidth / (HALF ? 16 : 32)."""
    return 4 if t == ipu.FLOAT16 else 2


# ------------------------------------------------------------------------------------------------
# MultiSlice


@njit(cache=True)
def _multi_slice(views, off, cnt, fp, ip):
    base = views[MS_F.base]
    offs = views[MS_F.offsets]
    out = views[MS_F.out]
    for v in range(off.shape[0]):
        region = ip[v, MS_IP.region]
        rows = ip[v, MS_IP.rows]
        row_base = ip[v, MS_IP.row_base]
        b0 = off[v, MS_F.base]
        o0 = off[v, MS_F.offsets]
        d0 = off[v, MS_F.out]
        m = cnt[v, MS_F.offsets]
        for i in range(m):
            r = np.int64(load(offs, o0 + i)) - row_base
            dst = d0 + i * region
            if r >= 0 and r < rows:
                src = b0 + r * region
                for j in range(region):
                    copy_elem(out, dst + j, base, src + j)
            else:
                fill_zero(out, dst, region)


def multi_slice_cycles(m, region, t) -> np.ndarray:
    """Worker cycles of one MultiSlice vertex gathering m rows of `region` elements.

    Source: poplibs lib/popops/PerformanceEstimation.cpp @ 03953b1c, getMultiSliceCycleEstimate
    (every offset in range, indices unsorted) for one worker: 30 cycles of prologue and epilogue
    + per offset 19 cycles of overhead + cyclesPerVector per vector of the slice, vectors of 2
    elements at 2 cycles for 16- and 32-bit types (poplibs copies half as 32-bit pairs), 4 at
    3 cycles for 8-bit ones: 30 + m x (19 + cpv x ceil(region / vw)). poplibs' MultiSlice is a
    MultiVertex and multiplies this by the 6 workers; here a worker vertex is one such worker.
    """
    m = np.asarray(m, np.int64)
    region = np.asarray(region, np.int64)
    vw, cpv = (4, 3) if t.itemsize == 1 else (2, 2)
    return 30 + m * (19 + cpv * (-(-region // vw)))


def _regions_of(params: dict, n: int) -> tuple[int, int]:
    """A MultiSlice / MultiUpdate calibration row's regionSize and numOffsets, which must cover n."""
    region, m = int(params["regionSize"]), int(params["numOffsets"])
    if region * m != n:
        raise KeyError(f"n ({n}) must be regionSize x numOffsets ({region} x {m})")
    return region, m


@ipu.register
class MultiSlice(Codelet):
    name = "MultiSlice"
    fields = (Field("base", IN), Field("offsets", IN), Field("out", OUT))
    takes_float8 = True  # moves elements whole (copy_elem)
    int_params = ("region", "rows", "row_base")
    allowed_types = (None, _INDEX_TYPES, None)
    poplibs_vertices = ("popops::MultiSlice",)

    def kernel(self):
        return _multi_slice

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if t.type.base != t.type.out:
            raise TypeError(f"MultiSlice: base is {t.type.base.name} but out is {t.type.out.name}")
        if np.any(t.count.base != t.region * t.rows):
            raise ValueError("MultiSlice: base must hold rows x region elements")
        if np.any(t.count.out != t.count.offsets * t.region):
            raise ValueError("MultiSlice: out must hold one region per offset")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        return multi_slice_cycles(t.count.offsets, t.region, t.type.base)

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        region, m = _regions_of(params, n)
        return ipu.Vertex({"base": t, "offsets": ipu.INT32, "out": t}, {"base": region * m, "offsets": m, "out": n},
                          {"region": region, "rows": m, "row_base": 0})

    def code_bytes(self, types):
        # assumption: the size of poplibs' MultiSlice assembly worker (~0.3 KiB)
        return 320

    def reference(self, base, offsets, region, rows, row_base=0):
        base = np.asarray(base).reshape(rows, region)
        r = np.asarray(offsets).astype(np.int64) - row_base
        ok = (r >= 0) & (r < rows)
        out = np.zeros((r.size, region), base.dtype)
        out[ok] = base[r[ok]]
        return out.reshape(-1)


# ------------------------------------------------------------------------------------------------
# MultiUpdate


@njit(cache=True)
def _max(a, b):
    if a != a:
        return a
    if b != b or b > a:
        return b
    return a


@njit(cache=True)
def _min(a, b):
    if a != a:
        return a
    if b != b or b < a:
        return b
    return a


@njit(cache=True)
def _update_run(base, bo, upd, uo, n, op):
    """base[bo:bo+n] op= upd[uo:uo+n] (the op branch outside the element loop)."""
    if op == 0:
        for j in range(n):
            copy_elem(base, bo + j, upd, uo + j)
    elif op == 1:
        for j in range(n):
            store(base, bo + j, load(base, bo + j) + load(upd, uo + j))
    elif op == 2:
        for j in range(n):
            store(base, bo + j, _max(load(base, bo + j), load(upd, uo + j)))
    elif op == 3:
        for j in range(n):
            store(base, bo + j, _min(load(base, bo + j), load(upd, uo + j)))
    else:
        for j in range(n):
            store(base, bo + j, load(base, bo + j) * load(upd, uo + j))


@njit(cache=True)
def _update_per_column(base, b0, offs, o0, upd, u0, k_rows, region, rows, row_base, op, touched, track):
    """base[offs[k, j], j] op= upd[k, j] for every update element (the op branch outside the
    loops); offsets out of [row_base, row_base + rows) are skipped."""
    if op == 0:
        for k in range(k_rows):
            for j in range(region):
                r = np.int64(load(offs, o0 + k * region + j)) - row_base
                if r >= 0 and r < rows:
                    copy_elem(base, b0 + r * region + j, upd, u0 + k * region + j)
                    if track != 0:
                        touched[r * region + j] = True
    elif op == 1:
        for k in range(k_rows):
            for j in range(region):
                r = np.int64(load(offs, o0 + k * region + j)) - row_base
                if r >= 0 and r < rows:
                    i = b0 + r * region + j
                    store(base, i, load(base, i) + load(upd, u0 + k * region + j))
                    if track != 0:
                        touched[r * region + j] = True
    elif op == 2:
        for k in range(k_rows):
            for j in range(region):
                r = np.int64(load(offs, o0 + k * region + j)) - row_base
                if r >= 0 and r < rows:
                    i = b0 + r * region + j
                    store(base, i, _max(load(base, i), load(upd, u0 + k * region + j)))
                    if track != 0:
                        touched[r * region + j] = True
    elif op == 3:
        for k in range(k_rows):
            for j in range(region):
                r = np.int64(load(offs, o0 + k * region + j)) - row_base
                if r >= 0 and r < rows:
                    i = b0 + r * region + j
                    store(base, i, _min(load(base, i), load(upd, u0 + k * region + j)))
                    if track != 0:
                        touched[r * region + j] = True
    else:
        for k in range(k_rows):
            for j in range(region):
                r = np.int64(load(offs, o0 + k * region + j)) - row_base
                if r >= 0 and r < rows:
                    i = b0 + r * region + j
                    store(base, i, load(base, i) * load(upd, u0 + k * region + j))
                    if track != 0:
                        touched[r * region + j] = True


@njit(cache=True)
def _multi_update(views, off, cnt, fp, ip):
    base = views[MU_F.base]
    offs = views[MU_F.offsets]
    upd = views[MU_F.updates]
    for v in range(off.shape[0]):
        region = ip[v, MU_IP.region]
        rows = ip[v, MU_IP.rows]
        row_base = ip[v, MU_IP.row_base]
        op = ip[v, MU_IP.op]
        per_column = ip[v, MU_IP.per_column]
        init = ip[v, MU_IP.init]
        track = ip[v, MU_IP.track]
        b0 = off[v, MU_F.base]
        o0 = off[v, MU_F.offsets]
        u0 = off[v, MU_F.updates]
        nb = rows * region
        if init != 0:
            x = fp[v, MU_FP.init_value]
            for k in range(nb):
                store(base, b0 + k, x)
        touched = np.zeros(nb if track != 0 else 0, np.bool_)
        if region == 0:
            continue
        k_rows = cnt[v, MU_F.updates] // region
        if per_column == 0:
            for k in range(k_rows):
                r = np.int64(load(offs, o0 + k)) - row_base
                if r >= 0 and r < rows:
                    _update_run(base, b0 + r * region, upd, u0 + k * region, region, op)
                    if track != 0:
                        for j in range(region):
                            touched[r * region + j] = True
        else:
            _update_per_column(base, b0, offs, o0, upd, u0, k_rows, region, rows, row_base, op, touched, track)
        if track != 0:
            for k in range(nb):
                if not touched[k]:
                    zero_elem(base, b0 + k)


def multi_update_cycles(k_rows, region, rows, op, per_column, init, track, t) -> np.ndarray:
    """Worker cycles of one MultiUpdate vertex.

    Sources (poplibs lib/popops/PerformanceEstimation.cpp @ 03953b1c, one worker's share, every
    offset in range, indices unsorted):
    - op none (a plain write): getMultiSliceCycleEstimate with isUpdate, 29 + n x (19 + cpv x
      ceil(region / vw)) (vw, cpv as MultiSlice: 2 elements at 2 cycles for 16/32-bit types, 4 at 3
      for 8-bit ones);
    - add / max / min / mul: getMultiUpdateOpCycleEstimate (MultiUpdateOp, unscaled): 3 cycles to
      load the size and exit on zero, 29 (4-byte types) / 30 (others) before the outer loop, and per
      offset 11 / 12 cycles plus 3 per further atom of the region (an atom is the 32-bit atomic
      store: 1 float, 2 halves); a region that is not a whole number of atoms needs sub-word
      writes, 20 cycles per element instead.
    - per-column indices (ScatterElements): poplibs linearises the indices, so every element is an
      offset of its own with a region of 1: n = k_rows x region, region = 1.
    - init (fill the block first, instead of a separate popops::fill): derivation, 10 cycles of
      setup + one 64-bit store per cycle;
    - track (max/min with no initial values: positions no update reached become 0, PopART's
      masked fill): derivation, 10 + 2 cycles per block element (clear and test a flag).
    """
    k_rows = np.asarray(k_rows, np.int64)
    region = np.asarray(region, np.int64)
    rows = np.asarray(rows, np.int64)
    op = np.asarray(op, np.int64)
    per_column = np.asarray(per_column, np.int64) != 0
    n = np.where(per_column, k_rows * region, k_rows)
    reg = np.where(per_column, 1, region)
    isz = t.itemsize
    vw, cpv = (4, 3) if isz == 1 else (2, 2)
    plain = 29 + n * (19 + cpv * (-(-reg // vw)))
    epa = max(1, 4 // isz)  # elements per 32-bit atom (the IPU's atomic store granularity)
    whole = reg % epa == 0
    four = isz == 4
    per_offset = (11 if four else 12) + np.where(whole, (reg // epa - 1) * 3, reg * 20)
    reducing = 3 + (29 if four else 30) + np.where(n > 0, n * per_offset, 0)
    cycles = np.where(op == UpdateOpCode.ASSIGN, plain, reducing)
    nb = rows * region
    cycles = cycles + np.where(np.asarray(init) != 0, 10 + -(-(nb * isz) // 8), 0)
    cycles = cycles + np.where(np.asarray(track) != 0, 10 + 2 * nb, 0)
    return cycles


@ipu.register
class MultiUpdate(Codelet):
    name = "MultiUpdate"
    fields = (Field("base", INOUT), Field("offsets", IN), Field("updates", IN))
    float_params = ("init_value",)
    int_params = ("region", "rows", "row_base", "op", "per_column", "init", "track")
    allowed_types = (None, _INDEX_TYPES, None)
    poplibs_vertices = ("popops::MultiUpdate", "popops::MultiUpdateOp")

    def kernel(self):
        return _multi_update

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if t.type.base != t.type.updates:
            raise TypeError(f"MultiUpdate: base is {t.type.base.name} but updates is {t.type.updates.name}")
        region = t.region
        if np.any(t.count.base != region * t.rows):
            raise ValueError("MultiUpdate: base must hold rows x region elements")
        if np.any((region > 0) & (t.count.updates % np.maximum(region, 1) != 0)):
            raise ValueError("MultiUpdate: updates must hold whole regions")
        k = t.count.updates // np.maximum(region, 1)
        want = np.where(t.per_column != 0, t.count.updates, k)
        if np.any((region > 0) & (t.count.offsets != want)):
            raise ValueError("MultiUpdate: one offset per update row (or per update element with per_column)")
        if np.any((t.op < 0) | (t.op > UpdateOpCode.MUL)):
            raise ValueError("MultiUpdate: op must be 0 (none), 1 (add), 2 (max), 3 (min) or 4 (mul)")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        return multi_update_cycles(t.count.updates // np.maximum(t.region, 1), t.region, t.rows, t.op, t.per_column,
                                   t.init, t.track, t.type.base)

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        region, m = _regions_of(params, n)
        op = UpdateOpCode.ASSIGN if vertex == "popops::MultiUpdate" else getattr(UpdateOpCode, params.get("op", "ADD"))
        return ipu.Vertex({"base": t, "offsets": ipu.INT32, "updates": t}, {"base": n, "offsets": m, "updates": n},
                          {"init_value": 0.0, "region": region, "rows": m, "row_base": 0, "op": int(op),
                           "per_column": 0, "init": 0, "track": 0})

    def code_bytes(self, types):
        # assumption: poplibs' MultiUpdate + MultiUpdateOp workers together (~0.6 KiB)
        return 640

    def reference(self, base, offsets, updates, region, rows, row_base=0, op="none", per_column=False,
                  init=None, track=False):
        """NumPy: returns the new base (rows * region,)."""
        base = np.array(base).reshape(rows, region)
        dt = base.dtype
        if init is not None:
            base[...] = np.asarray(init).astype(dt) if dt.kind != "f" else init
        upd = np.asarray(updates).reshape(-1, region)
        offs = np.asarray(offsets).astype(np.int64)
        k = upd.shape[0]
        if per_column:
            r = offs.reshape(k, region) - row_base
            cols = np.broadcast_to(np.arange(region), (k, region))
        else:
            r = np.broadcast_to((offs - row_base)[:, None], (k, region))
            cols = np.broadcast_to(np.arange(region), (k, region))
        ok = (r >= 0) & (r < rows)
        rr, cc, uu = r[ok], cols[ok], upd[ok]
        # every update is one operation rounded to the element type (float16 included), in order
        work = base.copy()
        vals = uu.astype(dt)
        if op in ("none",):
            work[rr, cc] = vals  # NumPy assigns in order: the last write wins
        elif op in ("sum", "add"):
            np.add.at(work, (rr, cc), vals)
        elif op == "max":
            np.maximum.at(work, (rr, cc), vals)
        elif op == "min":
            np.minimum.at(work, (rr, cc), vals)
        elif op == "mul":
            np.multiply.at(work, (rr, cc), vals)
        else:
            raise ValueError(op)
        if track:
            touched = np.zeros((rows, region), bool)
            touched[rr, cc] = True
            work[~touched] = 0
        return work.astype(dt).reshape(-1)


# ------------------------------------------------------------------------------------------------
# DynamicSlice / DynamicUpdate


@njit(cache=True)
def _dynamic_rows(base, b0, offv, o0, other, x0, n, region, rows, first, into_base):
    """One vertex: move the n // region rows of `region` elements between base (rows starting at
    the run-time offset, wrapping) and `other` (contiguous): base -> other for a slice, other ->
    base for an update."""
    if region == 0 or rows == 0:
        return
    o = np.int64(load(offv, o0))
    if o < 0 or o >= rows:
        o = 0
    for j in range(n // region):
        r = (o + first + j) % rows
        if into_base:
            for e in range(region):
                copy_elem(base, b0 + r * region + e, other, x0 + j * region + e)
        else:
            for e in range(region):
                copy_elem(other, x0 + j * region + e, base, b0 + r * region + e)


@njit(cache=True)
def _dynamic_slice(views, off, cnt, fp, ip):
    base, offv, out = views[DS_F.base], views[DS_F.offset], views[DS_F.out]
    for v in range(off.shape[0]):
        _dynamic_rows(base, off[v, DS_F.base], offv, off[v, DS_F.offset], out, off[v, DS_F.out], cnt[v, DS_F.out],
                      ip[v, DYN_IP.region], ip[v, DYN_IP.rows], ip[v, DYN_IP.first], False)


@njit(cache=True)
def _dynamic_update(views, off, cnt, fp, ip):
    base, offv, upd = views[DU_F.base], views[DU_F.offset], views[DU_F.update]
    for v in range(off.shape[0]):
        _dynamic_rows(base, off[v, DU_F.base], offv, off[v, DU_F.offset], upd, off[v, DU_F.update],
                      cnt[v, DU_F.update], ip[v, DYN_IP.region], ip[v, DYN_IP.rows], ip[v, DYN_IP.first], True)


def dynamic_slice_cycles(s, region, t, workers: int = 6) -> np.ndarray:
    """Tile cycles of one DynamicSlice / DynamicUpdate supervisor vertex moving s rows of `region`
    elements.

    Source: poplibs lib/popops/popopsCycleEstimators.cpp, getDynamicSlice1DEstimate (the
    DynamicSlice1D / DynamicUpdateSlice1D MultiVertex; the version with 8-bit and 64-bit types):
    the region is split over the 6 workers, ceil(region / 6) elements each, copied as
    nCopies = floor(ceil(region / 6) / vectorWidth) 64-bit vectors (vectorWidth 4 for half and
    8-bit types, 2 for 32-bit ones); supervisor 11 + 1 + 6 + 1 + 6 cycles; a worker
    35 + (24 + 2 x nCopies) x s cycles, 8-bit types 72 + (70 + 2 x nCopies) x s.
    """
    s = np.asarray(s, np.int64)
    region = np.asarray(region, np.int64)
    per_worker = -(-region // workers)
    n_copies = per_worker // (4 if t.itemsize <= 2 else 2)
    if t.itemsize == 1:
        worker = 72 + (70 + 2 * n_copies) * s
    else:
        worker = 35 + (24 + 2 * n_copies) * s
    return 11 + 1 + 6 + 1 + 6 + workers * worker


class _DynamicBase(Codelet):
    int_params = ("region", "rows", "first")
    takes_float8 = True  # moves elements whole (copy_elem)
    # poplibs' DynamicSlice1D is a MultiVertex: one vertex splits its region over the workers
    supervisor = True
    allowed_types = (None, _INDEX_TYPES, None)

    slice_field = ""  # the field of the moved rows (out of a slice, update into an update)

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        moved, moved_type = getattr(t.count, self.slice_field), getattr(t.type, self.slice_field)
        if t.type.base != moved_type:
            raise TypeError(f"{self.name}: the base is {t.type.base.name} but the slice is {moved_type.name}")
        if np.any(t.count.offset != 1):
            raise ValueError(f"{self.name}: the offset field holds one element")
        if np.any(t.count.base != t.region * t.rows):
            raise ValueError(f"{self.name}: base must hold rows x region elements")
        if np.any((t.region > 0) & (moved % np.maximum(t.region, 1) != 0)):
            raise ValueError(f"{self.name}: the slice must hold whole regions")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        moved = getattr(t.count, self.slice_field)
        return dynamic_slice_cycles(moved // np.maximum(t.region, 1), t.region, t.type.base, target.worker_contexts)

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        region = int(params["regionSize"])
        sub = int(params["numSubElements"])
        if region * sub != n:
            raise KeyError(f"n ({n}) must be regionSize x numSubElements ({region} x {sub})")
        rows = max(sub, int(params.get("numBaseElements", sub)))
        return ipu.Vertex({"base": t, "offset": ipu.INT32, self.slice_field: t},
                          {"base": region * rows, "offset": 1, self.slice_field: region * sub},
                          {"region": region, "rows": rows, "first": 0})

    def code_bytes(self, types):
        # assumption: poplibs' DynamicSlice1D supervisor + worker assembly (~0.3 KiB)
        return 320


@ipu.register
class DynamicSlice(_DynamicBase):
    name = "DynamicSlice"
    fields = (Field("base", IN), Field("offset", IN), Field("out", OUT))
    slice_field = "out"
    poplibs_vertices = ("popops::DynamicSlice1D",)

    def kernel(self):
        return _dynamic_slice

    def reference(self, base, offset, region, rows, size, first=0):
        base = np.asarray(base).reshape(rows, region)
        o = int(np.asarray(offset).reshape(-1)[0])
        o = 0 if o < 0 or o >= rows else o
        r = (o + first + np.arange(size)) % rows
        return base[r].reshape(-1)


@ipu.register
class DynamicUpdate(_DynamicBase):
    name = "DynamicUpdate"
    fields = (Field("base", INOUT), Field("offset", IN), Field("update", IN))
    slice_field = "update"
    poplibs_vertices = ("popops::DynamicUpdateSlice1D",)

    def kernel(self):
        return _dynamic_update

    def reference(self, base, offset, update, region, rows, first=0):
        out = np.array(base).reshape(rows, region)
        upd = np.asarray(update).reshape(-1, region)
        o = int(np.asarray(offset).reshape(-1)[0])
        o = 0 if o < 0 or o >= rows else o
        r = (o + first + np.arange(upd.shape[0])) % rows
        out[r] = upd
        return out.reshape(-1)


# ------------------------------------------------------------------------------------------------
# EncodeOneHot


@njit(cache=True)
def _encode_one_hot(views, off, cnt, fp, ip):
    idx = views[HOT_F.indices]
    vals = views[HOT_F.values]
    out = views[HOT_F.out]
    for v in range(off.shape[0]):
        classes = ip[v, HOT_IP.classes]
        n = cnt[v, HOT_F.indices]
        i0 = off[v, HOT_F.indices]
        v0 = off[v, HOT_F.values]
        d0 = off[v, HOT_F.out]
        for i in range(n):
            row = d0 + i * classes
            for c in range(classes):
                copy_elem(out, row + c, vals, v0)
            c = np.int64(load(idx, i0 + i))
            if c >= 0 and c < classes:
                copy_elem(out, row + c, vals, v0 + 1)


def encode_one_hot_cycles(n, classes, t) -> np.ndarray:
    """Worker cycles of one EncodeOneHot vertex over n indices.

    popops::encodeOneHot with custom values first fills the output with the off value, then runs
    EncodeOneHotCustomValues; this vertex does both. Fill: one 64-bit store per cycle (derivation:
    the IPU stores 8 bytes per cycle) over n x classes elements, plus 10 cycles of setup; the
    vertex: 100 cycles per index (poplibs popopsCycleEstimators.cpp, EncodeOneHotCustomValues,
    a C++ worker vertex).
    """
    n = np.asarray(n, np.int64)
    classes = np.asarray(classes, np.int64)
    return 10 + -(-(n * classes * t.itemsize) // 8) + 100 * n


@ipu.register
class EncodeOneHot(Codelet):
    """out[i, :] = values[0], except out[i, indices[i]] = values[1] (an index outside
    [0, classes) leaves the whole row at values[0])."""

    name = "EncodeOneHot"
    fields = (Field("indices", IN), Field("values", IN), Field("out", OUT))
    int_params = ("classes",)
    allowed_types = (_INDEX_TYPES, None, None)

    def kernel(self):
        return _encode_one_hot

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if t.type.values != t.type.out:
            raise TypeError(f"EncodeOneHot: values are {t.type.values.name} but out is {t.type.out.name}")
        if np.any(t.count.values != 2):
            raise ValueError("EncodeOneHot: values holds (off value, on value)")
        if np.any(t.count.out != t.count.indices * t.classes):
            raise ValueError("EncodeOneHot: out must hold classes elements per index")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        return encode_one_hot_cycles(t.count.indices, t.classes, t.type.out)

    def code_bytes(self, types):
        return 256  # assumption: a small compiled C++ worker

    def reference(self, indices, values, classes):
        idx = np.asarray(indices).astype(np.int64).reshape(-1)
        values = np.asarray(values)
        out = np.full((idx.size, classes), values[0], values.dtype)
        ok = (idx >= 0) & (idx < classes)
        out[np.flatnonzero(ok), idx[ok]] = values[1]
        return out.reshape(-1)


# the kernels' columns, by name
MS_F, MS_IP = MultiSlice.F, MultiSlice.IP
MU_F, MU_FP, MU_IP = MultiUpdate.F, MultiUpdate.FP, MultiUpdate.IP
DS_F, DU_F, DYN_IP = DynamicSlice.F, DynamicUpdate.F, _DynamicBase.IP
HOT_F, HOT_IP = EncodeOneHot.F, EncodeOneHot.IP
