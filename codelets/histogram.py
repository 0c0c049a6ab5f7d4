"""Histogram vertices: Histogram (one tile's partial counts) and HistogramCombine (their sum).

With limits l_0 < ... < l_{L-1} an element x (or |x|) falls in bin
    0 if x < l_0,   i if l_{i-1} <= x < l_i,   L if x >= l_{L-1} (NaN too),
the bins of popops::histogram (which counts x < l_i for each limit and takes differences, so a
NaN, never below a limit, lands in the last bin). Counts are uint32.
"""
from __future__ import annotations

import numpy as np
from numba import njit

import ipu
from ipu import IN, OUT, Codelet, Field, load

_FLOATS = (ipu.FLOAT32, ipu.FLOAT16)


@njit(cache=True)
def _bin(limits, l0, L, x):
    if x != x:
        return L
    lo = 0
    hi = L
    while lo < hi:
        mid = (lo + hi) // 2
        if load(limits, l0 + mid) <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@njit(cache=True)
def _histogram(views, off, cnt, fp, ip):
    data = views[HIST_F.data]
    limits = views[HIST_F.limits]
    out = views[HIST_F.out]
    for v in range(off.shape[0]):
        d0 = off[v, HIST_F.data]
        l0 = off[v, HIST_F.limits]
        o0 = off[v, HIST_F.out]
        L = cnt[v, HIST_F.limits]
        for k in range(L + 1):
            out[o0 + k] = 0
        if ip[v, HIST_IP.absolute] != 0:
            for i in range(cnt[v, HIST_F.data]):
                b = _bin(limits, l0, L, abs(load(data, d0 + i)))
                out[o0 + b] += 1
        else:
            for i in range(cnt[v, HIST_F.data]):
                b = _bin(limits, l0, L, load(data, d0 + i))
                out[o0 + b] += 1


@njit(cache=True)
def _histogram_combine(views, off, cnt, fp, ip):
    parts = views[COMB_F.partials]
    out = views[COMB_F.out]
    for v in range(off.shape[0]):
        nb = cnt[v, COMB_F.out]
        p0 = off[v, COMB_F.partials]
        o0 = off[v, COMB_F.out]
        if nb == 0:
            continue
        for k in range(nb):
            out[o0 + k] = 0
        for p in range(cnt[v, COMB_F.partials] // nb):
            for k in range(nb):
                out[o0 + k] += parts[p0 + p * nb + k]


def histogram_cycles(n, limits, absolute, t) -> np.ndarray:
    """Worker cycles of one Histogram vertex over n elements and `limits` limits.

    Source: poplibs popopsCycleEstimators.cpp, Histogram2D with one data region and unpacked
    pointers: 7 + pre-loop (3 float / 5 half) + per limit (data loop + 5 float / 6 half), the data
    loop being 10 + (3 + abs) per vector of 2 floats + (2 + abs) for an odd float (float), or
    16 + (3 + abs) per vector of 4 halves + (3 + abs) each for a trailing pair and single (half);
    then 3 + 10 + 2 per limit of post-processing.
    """
    n = np.asarray(n, np.int64)
    limits = np.asarray(limits, np.int64)
    a = np.asarray(absolute, np.int64) != 0
    if t == ipu.FLOAT16:
        loop = 16 + (3 + a) * (n & 1) + (3 + a) * ((n >> 1) & 1) + (3 + a) * (n // 4)
        cycles = 7 + 5 + (loop + 6) * limits
    else:
        loop = 10 + (2 + a) * (n & 1) + (3 + a) * (n // 2)
        cycles = 7 + 3 + (loop + 5) * limits
    return cycles + 3 + 10 + limits * 2


def histogram_combine_cycles(parts, bins) -> np.ndarray:
    """Derivation (poplibs sums partial histograms with popops::reduce): 10 cycles of entry, per
    bin 4 to set up and store, and per partial 2 (a load and an add)."""
    parts = np.asarray(parts, np.int64)
    bins = np.asarray(bins, np.int64)
    return 10 + bins * (4 + 2 * parts)


@ipu.register
class Histogram(Codelet):
    name = "Histogram"
    fields = (Field("data", IN), Field("limits", IN), Field("out", OUT))
    int_params = ("absolute",)
    allowed_types = (_FLOATS, _FLOATS, (ipu.UINT32,))
    poplibs_vertices = ("popops::Histogram2D",)

    def kernel(self):
        return _histogram

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if t.type.data != t.type.limits:
            raise TypeError(f"Histogram: data is {t.type.data.name} but limits are {t.type.limits.name}")
        if np.any(t.count.out != t.count.limits + 1):
            raise ValueError("Histogram: out holds one more bin than there are limits")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        return histogram_cycles(t.count.data, t.count.limits, t.absolute, t.type.data)

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        limits = int(params["limits"])
        return ipu.Vertex({"data": t, "limits": t, "out": ipu.UINT32}, {"data": n, "limits": limits, "out": limits + 1},
                          {"absolute": int(params.get("absolute", 0))})

    def code_bytes(self, types):
        return 352  # assumption: poplibs' Histogram2D assembly (~0.35 KiB)

    def reference(self, data, limits, absolute=False):
        x = np.asarray(data).reshape(-1)
        if absolute:
            x = np.abs(x)
        lim = np.asarray(limits, x.dtype)
        b = np.searchsorted(lim, x, side="right")  # NaN sorts last: the last bin
        b[np.isnan(x)] = lim.size
        return np.bincount(b, minlength=lim.size + 1).astype(np.uint32)


@ipu.register
class HistogramCombine(Codelet):
    name = "HistogramCombine"
    fields = (Field("partials", IN), Field("out", OUT))
    allowed_types = ((ipu.UINT32,), (ipu.UINT32,))

    def kernel(self):
        return _histogram_combine

    def check(self, types, cnt, fp, ip):
        c = self.table(types, cnt).count
        if np.any((c.out > 0) & (c.partials % np.maximum(c.out, 1) != 0)):
            raise ValueError("HistogramCombine: partials hold whole histograms")

    def cycles(self, types, cnt, fp, ip, target):
        c = self.table(types, cnt).count
        return histogram_combine_cycles(c.partials // np.maximum(c.out, 1), c.out)

    def code_bytes(self, types):
        return 128

    def reference(self, partials, bins):
        return np.asarray(partials, np.uint32).reshape(-1, bins).sum(0, dtype=np.uint32)


# the kernels' columns, by name
HIST_F, HIST_IP = Histogram.F, Histogram.IP
COMB_F = HistogramCombine.F
