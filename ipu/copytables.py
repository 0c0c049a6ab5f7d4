"""Copy tables: how an element-wise copy becomes runs of bytes, and the compiled copiers.

A copy table lists runs (source byte offset, destination byte offset, bytes) that are contiguous
at both ends. The compiler builds them once (`runs`); the engine copies them with `copy_runs`,
in the widest word that divides every offset and size (`word_table`).
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["CopyTable", "copy_runs", "copy_runs_staged", "merge_runs", "runs", "word_table"]


class CopyTable:
    """The payload of an exchange step: byte runs within one replica's memory. `staged`: source
    and destination overlap (a copy within one variable), so the sources are read first.

    Only the table the engine runs is kept: the runs in the widest word dividing every offset and
    size, as uint32 when the offsets fit (12 bytes per run instead of 48; copy tables are the
    largest host structure of a big model after its simulated memory). `src_off`, `dst_off` and
    `nbytes` give the byte form back when asked."""

    __slots__ = ("staged", "_words")

    def __init__(self, src_off, dst_off, nbytes, staged: bool = False):
        self.staged = bool(staged)
        dt, s, d, n = word_table(np.asarray(src_off, np.int64), np.asarray(dst_off, np.int64),
                                 np.asarray(nbytes, np.int64))
        small = max(int(s.max(initial=0)), int(d.max(initial=0)), int(n.max(initial=0))) < 2 ** 32
        if small:
            s, d, n = (x.astype(np.uint32) for x in (s, d, n))
        self._words = (dt, s, d, n)

    def words(self):
        """(word dtype, source, destination, count) in units of that word."""
        return self._words

    def _bytes(self, i: int) -> np.ndarray:
        dt = self._words[0]
        return self._words[i].astype(np.int64) * np.dtype(dt).itemsize

    @property
    def src_off(self) -> np.ndarray:
        return self._bytes(1)

    @property
    def dst_off(self) -> np.ndarray:
        return self._bytes(2)

    @property
    def nbytes(self) -> np.ndarray:
        return self._bytes(3)


def runs(sa, da, st, dt, isz):
    """Group an element-wise copy (byte addresses and tiles of every element at both ends) into
    runs contiguous at both ends on fixed tiles:
    (source offsets, destination offsets, bytes, source tiles, destination tiles)."""
    args = [np.ascontiguousarray(np.asarray(a, np.int64)) for a in (sa, da, st, dt)]
    return _runs_kernel(*args, isz)


def merge_runs(src, dst, isz):
    """The copy runs of a copy given both ends as address runs (`Layout.run_addresses`: byte
    addresses, tiles and element counts of stretches in the copy's element order): the same
    table `runs` makes from per-element addresses, built in one pass over the runs."""
    (sa, st, sn), (da, dt, dn) = src, dst
    return _merge_kernel(*(np.ascontiguousarray(a, np.int64) for a in (sa, st, sn, da, dt, dn)), isz)


@njit(cache=True)
def _merge_kernel(sa, st, sn, da, dt, dn, isz):
    cap = sa.shape[0] + da.shape[0]
    so = np.empty(cap, np.int64)
    do = np.empty(cap, np.int64)
    nb = np.empty(cap, np.int64)
    ts = np.empty(cap, np.int64)
    td = np.empty(cap, np.int64)
    i = 0
    j = 0
    ui = 0  # elements of source part i / destination part j already used
    uj = 0
    r = -1
    while i < sa.shape[0] and j < da.shape[0]:
        k = min(sn[i] - ui, dn[j] - uj)
        a = sa[i] + ui * isz
        b = da[j] + uj * isz
        if r >= 0 and so[r] + nb[r] == a and do[r] + nb[r] == b and ts[r] == st[i] and td[r] == dt[j]:
            nb[r] += k * isz  # continues the previous run at both ends
        else:
            r += 1
            so[r] = a
            do[r] = b
            nb[r] = k * isz
            ts[r] = st[i]
            td[r] = dt[j]
        ui += k
        uj += k
        if ui == sn[i]:
            i += 1
            ui = 0
        if uj == dn[j]:
            j += 1
            uj = 0
    return so[:r + 1].copy(), do[:r + 1].copy(), nb[:r + 1].copy(), ts[:r + 1].copy(), td[:r + 1].copy()


@njit(cache=True)
def _runs_kernel(sa, da, st, dt, isz):
    n = sa.shape[0]
    count = 0
    for i in range(n):
        if i == 0 or sa[i] != sa[i - 1] + isz or da[i] != da[i - 1] + isz or st[i] != st[i - 1] \
                or dt[i] != dt[i - 1]:
            count += 1
    so = np.empty(count, np.int64)
    do = np.empty(count, np.int64)
    nb = np.empty(count, np.int64)
    ts = np.empty(count, np.int64)
    td = np.empty(count, np.int64)
    r = -1
    for i in range(n):
        if i == 0 or sa[i] != sa[i - 1] + isz or da[i] != da[i - 1] + isz or st[i] != st[i - 1] \
                or dt[i] != dt[i - 1]:
            r += 1
            so[r] = sa[i]
            do[r] = da[i]
            nb[r] = 0
            ts[r] = st[i]
            td[r] = dt[i]
        nb[r] += isz
    return so, do, nb, ts, td


def word_table(src_off, dst_off, nbytes):
    """The copy table in the widest unit (8, 4 or 2 bytes) that divides every offset and size:
    copying words instead of bytes is several times faster."""
    for unit, dt in ((8, np.uint64), (4, np.uint32), (2, np.uint16)):
        if not ((src_off % unit).any() or (dst_off % unit).any() or (nbytes % unit).any()):
            return dt, src_off // unit, dst_off // unit, nbytes // unit
    return np.uint8, src_off, dst_off, nbytes


@njit(cache=True)
def copy_runs(src, dst, src_off, dst_off, nbytes):
    """Copy runs of elements (units of the arrays' type); short runs element by element, since
    a slice assignment costs more than a few scalar moves."""
    for i in range(src_off.shape[0]):
        a = src_off[i]
        b = dst_off[i]
        n = nbytes[i]
        if n <= 16:
            for k in range(n):
                dst[b + k] = src[a + k]
        else:
            dst[b:b + n] = src[a:a + n]


@njit(cache=True)
def copy_runs_staged(mem, src_off, dst_off, nbytes):
    """Copy runs within one array whose sources and destinations may overlap: read all, then write."""
    total = 0
    for i in range(nbytes.shape[0]):
        total += nbytes[i]
    tmp = np.empty(total, np.uint8)
    k = 0
    for i in range(src_off.shape[0]):
        tmp[k:k + nbytes[i]] = mem[src_off[i]:src_off[i] + nbytes[i]]
        k += nbytes[i]
    k = 0
    for i in range(dst_off.shape[0]):
        mem[dst_off[i]:dst_off[i] + nbytes[i]] = tmp[k:k + nbytes[i]]
        k += nbytes[i]
