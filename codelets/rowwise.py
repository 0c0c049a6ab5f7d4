"""Row-wise vertices: ArgMinMax, TopK, Median and CumSum.

Each vertex takes `n` whole rows of `row` elements that sit consecutively on its tile (the
lowering first brings every row to one tile) and writes one result (or k, or a whole row) per
row. NaN is larger than every number here, as in NumPy's sort: argmax / argmin return the first
NaN of a row that has one (NumPy's rule), topk(largest) ranks NaNs first and topk(smallest) and
median rank them last. Ties keep the lower index first (a stable order).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

import ipu
from ipu import IN, OUT, Codelet, Field, load, store

from ._elem import copy_elem, zero_elem

_NUMERIC = (ipu.FLOAT32, ipu.FLOAT16, ipu.INT32, ipu.UINT32, ipu.INT16, ipu.UINT16, ipu.INT8, ipu.UINT8)
_INDEX_OUT = (ipu.INT32,)


# ------------------------------------------------------------------------------------------------
# ArgMinMax


@njit(cache=True)
def _best(x, b, n, op):
    """Index of the largest (op 0) or smallest (op 1) of x[b:b+n]; the first NaN if any; ties
    keep the first."""
    best = load(x, b)
    if best != best:
        return 0
    bi = 0
    if op == 0:
        for k in range(1, n):
            y = load(x, b + k)
            if y != y:
                return k
            if y > best:
                best = y
                bi = k
    else:
        for k in range(1, n):
            y = load(x, b + k)
            if y != y:
                return k
            if y < best:
                best = y
                bi = k
    return bi


@njit(cache=True)
def _arg_min_max(views, off, cnt, fp, ip):
    x = views[ARG_F.in_]
    out = views[ARG_F.out]
    for v in range(off.shape[0]):
        K = ip[v, ARG_IP.row]
        op = ip[v, ARG_IP.op]
        i0 = off[v, ARG_F.in_]
        o0 = off[v, ARG_F.out]
        for r in range(cnt[v, ARG_F.out]):
            out[o0 + r] = _best(x, i0 + r * K, K, op)


def arg_min_max_cycles(rows, K, t) -> np.ndarray:
    """Worker cycles of one ArgMinMax vertex over `rows` rows of K elements.

    Source: poplibs popnnCycleEstimators.cpp, ReduceMaxClassSparse / ReduceMinClassSparse (one
    row each): 5 cycles of vertex overhead, then for float / half (assembly) 2 + 3 + 3 + 1 +
    3 x (K - 1) + 3 + 6 + 4 cycles per row; for integer types (compiled) 18 + 6 x K per row.
    """
    rows = np.asarray(rows, np.int64)
    K = np.asarray(K, np.int64)
    if t in (ipu.FLOAT32, ipu.FLOAT16):
        per_row = 22 + 3 * np.maximum(K - 1, 0)
    else:
        per_row = 18 + 6 * K
    return 5 + rows * per_row


@ipu.register
class ArgMinMax(Codelet):
    """out[r] = index of the largest (op 0) or smallest (op 1) element of row r."""

    name = "ArgMinMax"
    fields = (Field("in", IN), Field("out", OUT))
    int_params = ("row", "op")
    allowed_types = (_NUMERIC, _INDEX_OUT)
    poplibs_vertices = ("popnn::ReduceMaxClassSparse",)

    def kernel(self):
        return _arg_min_max

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if np.any(t.row < 1):
            raise ValueError("ArgMinMax: rows must have at least one element")
        if np.any(t.count.in_ != t.count.out * t.row):
            raise ValueError("ArgMinMax: in must hold out x row elements")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        return arg_min_max_cycles(t.count.out, t.row, t.type.in_)

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        return ipu.Vertex({"in": t, "out": ipu.INT32}, {"in": n, "out": 1}, {"row": n, "op": 0})

    def code_bytes(self, types):
        return 192  # assumption: poplibs' ReduceMaxClassSparse assembly is ~0.2 KiB

    def reference(self, x, row, op=0):
        x = np.asarray(x).reshape(-1, row)
        return (np.argmax(x, axis=1) if op == 0 else np.argmin(x, axis=1)).astype(np.int32)


@njit(cache=True)
def _arg_min_max_partial(views, off, cnt, fp, ip):
    x = views[PART_F.in_]
    val = views[PART_F.value]
    idx = views[PART_F.index]
    for v in range(off.shape[0]):
        bi = _best(x, off[v, PART_F.in_], cnt[v, PART_F.in_], ip[v, PART_IP.op])
        copy_elem(val, off[v, PART_F.value], x, off[v, PART_F.in_] + bi)
        idx[off[v, PART_F.index]] = ip[v, PART_IP.base] + bi


@njit(cache=True)
def _arg_min_max_combine(views, off, cnt, fp, ip):
    val = views[COMB_F.values]
    idx = views[COMB_F.indices]
    out = views[COMB_F.out]
    for v in range(off.shape[0]):
        bi = _best(val, off[v, COMB_F.values], cnt[v, COMB_F.values], ip[v, COMB_IP.op])
        out[off[v, COMB_F.out]] = idx[off[v, COMB_F.indices] + bi]


@ipu.register
class ArgMinMaxPartial(Codelet):
    """Stage 1 of an arg-reduction over a row too long for one tile: the best element of one
    chunk of a row, its value and its index in the row (`base` + its place in the chunk). NaN wins
    as in ArgMinMax."""

    name = "ArgMinMaxPartial"
    fields = (Field("in", IN), Field("value", OUT), Field("index", OUT))
    int_params = ("op", "base")
    allowed_types = (_NUMERIC, _NUMERIC, _INDEX_OUT)

    def kernel(self):
        return _arg_min_max_partial

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt)
        if t.type.in_ != t.type.value:
            raise TypeError(f"ArgMinMaxPartial: in is {t.type.in_.name} but value is {t.type.value.name}")
        if np.any(t.count.in_ < 1) or np.any(t.count.value != 1) or np.any(t.count.index != 1):
            raise ValueError("ArgMinMaxPartial: a non-empty chunk in, one value and one index out")

    def cycles(self, types, cnt, fp, ip, target):
        """poplibs popnnCycleEstimators.cpp, ReduceMaxClassSparse over the chunk (as ArgMinMax)."""
        t = self.table(types, cnt)
        return arg_min_max_cycles(1, t.count.in_, t.type.in_)

    def code_bytes(self, types):
        return 192

    def reference(self, x, op=0, base=0):
        x = np.asarray(x)
        i = int(np.argmax(x) if op == 0 else np.argmin(x))
        return x[i], base + i


@ipu.register
class ArgMinMaxCombine(Codelet):
    """Stage 2: out = the index of the best of the chunks' (value, index) partials; the first
    best chunk wins ties, so the lowest index does."""

    name = "ArgMinMaxCombine"
    fields = (Field("values", IN), Field("indices", IN), Field("out", OUT))
    int_params = ("op",)
    allowed_types = (_NUMERIC, _INDEX_OUT, _INDEX_OUT)

    def kernel(self):
        return _arg_min_max_combine

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt)
        if np.any(t.count.values < 1) or np.any(t.count.values != t.count.indices) or np.any(t.count.out != 1):
            raise ValueError("ArgMinMaxCombine: as many values as indices, one output")

    def cycles(self, types, cnt, fp, ip, target):
        """poplibs popnnCycleEstimators.cpp, ReduceMaxClassSparse (the sparse stage of
        popnn::argMax, activations with their labels) over the partials."""
        t = self.table(types, cnt)
        return arg_min_max_cycles(1, t.count.values, t.type.values)

    def code_bytes(self, types):
        return 192

    def reference(self, values, indices, op=0):
        values = np.asarray(values)
        j = int(np.argmax(values) if op == 0 else np.argmin(values))
        return np.asarray(indices)[j]


# ------------------------------------------------------------------------------------------------
# TopK and Median: a stable order of each row


@njit(cache=True)
def _row_order(x, b, K, descending):
    """Indices of row x[b:b+K] in order: ascending (NaNs last) or descending (NaNs first); ties in
    index order."""
    nan = 0
    for j in range(K):
        y = load(x, b + j)
        if y != y:
            nan += 1
    keys = np.empty(K - nan, np.float64)
    where = np.empty(K - nan, np.int64)
    nans = np.empty(nan, np.int64)
    a = 0
    c = 0
    for j in range(K):
        y = np.float64(load(x, b + j))
        if y != y:
            nans[c] = j
            c += 1
        else:
            keys[a] = y
            where[a] = j
            a += 1
    if descending:
        for j in range(K - nan):
            keys[j] = -keys[j]
    order = np.argsort(keys, kind="mergesort")
    out = np.empty(K, np.int64)
    if descending:
        for j in range(nan):
            out[j] = nans[j]
        for j in range(K - nan):
            out[nan + j] = where[order[j]]
    else:
        for j in range(K - nan):
            out[j] = where[order[j]]
        for j in range(nan):
            out[K - nan + j] = nans[j]
    return out


@njit(cache=True)
def _top_k(views, off, cnt, fp, ip):
    x = views[TOPK_F.in_]
    vals = views[TOPK_F.values]
    idx = views[TOPK_F.indices]
    for v in range(off.shape[0]):
        K = ip[v, TOPK_IP.row]
        k = ip[v, TOPK_IP.k]
        largest = ip[v, TOPK_IP.largest] != 0
        i0 = off[v, TOPK_F.in_]
        v0 = off[v, TOPK_F.values]
        x0 = off[v, TOPK_F.indices]
        rows = cnt[v, TOPK_F.values] // k if k > 0 else 0
        for r in range(rows):
            order = _row_order(x, i0 + r * K, K, largest)
            for j in range(k):
                copy_elem(vals, v0 + r * k + j, x, i0 + r * K + order[j])
                idx[x0 + r * k + j] = order[j]


def _heap_topk_cycles(K: int, k: int, sorted_: bool) -> int:
    """poplibs popnnCycleEstimators.cpp, ReduceMaxNClassSparse (the heap top-k of one row, worst
    case: ascending input), with C++'s truncation at each `cycles +=`:
    12 + 23 + sum_{i=1}^{k-1} (13 + 20 ln i) + (K - k)(13 + 20 ln k) + 8k
    [+ sum_{i=1}^{k} (10 + 20 ln i) when sorted]."""
    if k <= 0:
        return 12
    c = 12 + 23
    for i in range(1, k):
        c += int(13 + math.log(i) * 20)
    c += int((K - k) * (13 + math.log(k) * 20))
    c += 8 * k
    if sorted_:
        for i in range(k, 0, -1):
            c += 10
            c += int(20 * math.log(i))
    return c


def top_k_cycles(rows, K, k, sorted_) -> np.ndarray:
    """Worker cycles of a vertex doing the top-k of `rows` rows (one heap top-k per row)."""
    rows, K, k, s = np.broadcast_arrays(*(np.asarray(a, np.int64) for a in (rows, K, k, sorted_)))
    per_row = np.zeros(rows.shape, np.int64)
    cache = {}
    for i in np.ndindex(rows.shape):
        key = (int(K[i]), int(k[i]), bool(s[i] != 0))
        if key not in cache:
            cache[key] = _heap_topk_cycles(*key)
        per_row[i] = cache[key]
    return rows * per_row


@ipu.register
class TopK(Codelet):
    """The k largest (or smallest) of each row with their int32 indices, in order (largest first,
    or smallest first); `sorted` only changes the cost (unsorted output may be in any order)."""

    name = "TopK"
    fields = (Field("in", IN), Field("values", OUT), Field("indices", OUT))
    int_params = ("row", "k", "largest", "sorted")
    allowed_types = (_NUMERIC, _NUMERIC, _INDEX_OUT)
    poplibs_vertices = ("popnn::ReduceMaxNClassSparse",)

    def kernel(self):
        return _top_k

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if t.type.in_ != t.type.values:
            raise TypeError(f"TopK: in is {t.type.in_.name} but values is {t.type.values.name}")
        K, k = t.row, t.k
        if np.any((k < 1) | (k > K)):
            raise ValueError("TopK: k must be between 1 and the row length")
        c = t.count
        if np.any(c.values != c.indices) or np.any(c.values % k != 0) or np.any(c.in_ != c.values // k * K):
            raise ValueError("TopK: values and indices hold k per row of in")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        return top_k_cycles(t.count.values // t.k, t.row, t.k, t.sorted)

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        k = int(params["k"])
        return ipu.Vertex({"in": t, "values": t, "indices": ipu.INT32}, {"in": n, "values": k, "indices": k},
                          {"row": n, "k": k, "largest": 1, "sorted": int(params.get("sorted", 0))})

    def code_bytes(self, types):
        return 768  # assumption: poplibs' heap-based ReduceMaxNClassSparse (C++) is ~0.75 KiB

    def reference(self, x, row, k, largest=True):
        x = np.asarray(x).reshape(-1, row)
        order = _np_order(x, descending=largest)[:, :k]
        return np.take_along_axis(x, order, 1).reshape(-1), order.astype(np.int32).reshape(-1)


def _np_order(x, descending):
    """NumPy version of _row_order for every row of x (2-D)."""
    xf = x.astype(np.float64)
    nan = np.isnan(xf)
    if descending:
        # NaNs first, then descending by value, ties by index: sort by (not nan, -x) stably
        keys = np.where(nan, 0.0, -xf)
        order = np.argsort(keys, axis=1, kind="stable")
        nan_sorted = np.take_along_axis(nan, order, 1)
        rank = np.argsort(~nan_sorted, axis=1, kind="stable")
        return np.take_along_axis(order, rank, 1)
    keys = np.where(nan, 0.0, xf)
    order = np.argsort(keys, axis=1, kind="stable")
    nan_sorted = np.take_along_axis(nan, order, 1)
    rank = np.argsort(nan_sorted, axis=1, kind="stable")
    return np.take_along_axis(order, rank, 1)


@njit(cache=True)
def _median(views, off, cnt, fp, ip):
    x = views[MED_F.in_]
    vals = views[MED_F.values]
    idx = views[MED_F.indices]
    for v in range(off.shape[0]):
        K = ip[v, MED_IP.row]
        i0 = off[v, MED_F.in_]
        v0 = off[v, MED_F.values]
        x0 = off[v, MED_F.indices]
        m = (K - 1) // 2
        for r in range(cnt[v, MED_F.values]):
            order = _row_order(x, i0 + r * K, K, False)
            copy_elem(vals, v0 + r, x, i0 + r * K + order[m])
            idx[x0 + r] = order[m]


@ipu.register
class Median(Codelet):
    """The lower median of each row (element (row - 1) // 2 of the row in ascending order, NaNs
    last) and its int32 index in the row."""

    name = "Median"
    fields = (Field("in", IN), Field("values", OUT), Field("indices", OUT))
    int_params = ("row",)
    allowed_types = (_NUMERIC, _NUMERIC, _INDEX_OUT)

    def kernel(self):
        return _median

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if t.type.in_ != t.type.values:
            raise TypeError(f"Median: in is {t.type.in_.name} but values is {t.type.values.name}")
        c = t.count
        if np.any(t.row < 1) or np.any(c.values != c.indices) or np.any(c.in_ != c.values * t.row):
            raise ValueError("Median: in holds `row` elements per output")

    def cycles(self, types, cnt, fp, ip, target):
        """A median is a top-k of the k = (row - 1) // 2 + 1 smallest whose heap root is the
        answer (no sort): poplibs ReduceMaxNClassSparse with that k, unsorted (PopART reduces a
        median through popops top-k as well)."""
        t = self.table(types, cnt, fp, ip)
        K = t.row
        return top_k_cycles(t.count.values, K, (K - 1) // 2 + 1, np.zeros_like(K))

    def code_bytes(self, types):
        return 768  # as TopK

    def reference(self, x, row):
        x = np.asarray(x).reshape(-1, row)
        order = _np_order(x, descending=False)[:, (row - 1) // 2]
        return np.take_along_axis(x, order[:, None], 1).reshape(-1), order.astype(np.int32)


# ------------------------------------------------------------------------------------------------
# CumSum


@njit(cache=True)
def _cum_sum(views, off, cnt, fp, ip):
    x = views[CUM_F.in_]
    out = views[CUM_F.out]
    for v in range(off.shape[0]):
        K = ip[v, CUM_IP.row]
        exclusive = ip[v, CUM_IP.exclusive] != 0
        reverse = ip[v, CUM_IP.reverse] != 0
        if K == 0:
            continue
        i0 = off[v, CUM_F.in_]
        o0 = off[v, CUM_F.out]
        for r in range(cnt[v, CUM_F.in_] // K):
            b = i0 + r * K
            ob = o0 + r * K
            # the running sum starts from the first element (so it has the loaded type: float32
            # for float and half, a wide int for integers)
            if not reverse:
                acc = load(x, b)
                if exclusive:
                    zero_elem(out, ob)
                    for j in range(1, K):
                        store(out, ob + j, acc)
                        acc = acc + load(x, b + j)
                else:
                    store(out, ob, acc)
                    for j in range(1, K):
                        acc = acc + load(x, b + j)
                        store(out, ob + j, acc)
            else:
                acc = load(x, b + K - 1)
                if exclusive:
                    zero_elem(out, ob + K - 1)
                    for j in range(K - 2, -1, -1):
                        store(out, ob + j, acc)
                        acc = acc + load(x, b + j)
                else:
                    store(out, ob + K - 1, acc)
                    for j in range(K - 2, -1, -1):
                        acc = acc + load(x, b + j)
                        store(out, ob + j, acc)


def cum_sum_cycles(n, K, t) -> np.ndarray:
    """Worker cycles of one CumSum vertex over n elements in rows of K.

    Derivation (no poplibs vertex: PopART lowers cumsum to a triangular matmul): a compiled worker
    loop carries the running sum in a register and per element issues one load, one add and one
    store, 3 cycles (float / int); half adds a conversion each way, 5 cycles. 10 cycles of vertex
    entry and 8 per row to set up its pointers and clear the sum.
    """
    n = np.asarray(n, np.int64)
    K = np.maximum(np.asarray(K, np.int64), 1)
    per = 5 if t == ipu.FLOAT16 else 3
    return 10 + (n // K) * 8 + n * per


@ipu.register
class CumSum(Codelet):
    """Running sums along each row; `exclusive` leaves out the element itself, `reverse` sums from
    the end. float16 sums in float32 and rounds each output; integers wrap."""

    name = "CumSum"
    fields = (Field("in", IN), Field("out", OUT))
    int_params = ("row", "exclusive", "reverse")
    allowed_types = (_NUMERIC, _NUMERIC)

    def kernel(self):
        return _cum_sum

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if t.type.in_ != t.type.out:
            raise TypeError(f"CumSum: in is {t.type.in_.name} but out is {t.type.out.name}")
        if np.any(t.count.in_ != t.count.out) or np.any((t.row > 0) & (t.count.in_ % np.maximum(t.row, 1) != 0)):
            raise ValueError("CumSum: in and out hold the same whole rows")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        return cum_sum_cycles(t.count.in_, t.row, t.type.in_)

    def code_bytes(self, types):
        return 160  # assumption: a small compiled worker loop

    def reference(self, x, row, exclusive=False, reverse=False):
        x = np.asarray(x).reshape(-1, row)
        acc_t = np.float32 if x.dtype == np.float16 else (np.int64 if x.dtype.kind in "iu" else x.dtype)
        y = x[:, ::-1] if reverse else x
        c = np.cumsum(y.astype(acc_t), axis=1, dtype=acc_t)
        if exclusive:
            c = np.concatenate([np.zeros((c.shape[0], 1), acc_t), c[:, :-1]], axis=1)
        if reverse:
            c = c[:, ::-1]
        return c.astype(x.dtype).reshape(-1)


# the kernels' columns, by name
ARG_F, ARG_IP = ArgMinMax.F, ArgMinMax.IP
PART_F, PART_IP = ArgMinMaxPartial.F, ArgMinMaxPartial.IP
COMB_F, COMB_IP = ArgMinMaxCombine.F, ArgMinMaxCombine.IP
TOPK_F, TOPK_IP = TopK.F, TopK.IP
MED_F, MED_IP = Median.F, Median.IP
CUM_F, CUM_IP = CumSum.F, CumSum.IP
