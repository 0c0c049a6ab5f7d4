"""Copy tables: how an element-wise copy becomes runs of bytes, and the compiled copiers.

A copy table lists runs (source byte offset, destination byte offset, bytes) that are contiguous
at both ends. The compiler builds them once (`runs`); the engine copies them with `copy_runs`,
in the widest word that divides every offset and size (`word_table`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

__all__ = ["CopyTable", "copy_runs", "copy_runs_staged", "runs", "word_table"]


@dataclass(eq=False)
class CopyTable:
    """The payload of an exchange step: byte runs within one replica's memory. `staged`: source
    and destination overlap (a copy within one variable), so the sources are read first."""

    src_off: np.ndarray
    dst_off: np.ndarray
    nbytes: np.ndarray
    staged: bool = False
    _words: tuple | None = None  # (dtype, src, dst, n) in the widest word: built on first use

    def words(self):
        """(word dtype, source, destination, count) in units of that word."""
        if self._words is None:
            self._words = word_table(self.src_off, self.dst_off, self.nbytes)
        return self._words


def runs(sa, da, st, dt, isz):
    """Group an element-wise copy (byte addresses and tiles of every element at both ends) into
    runs contiguous at both ends on fixed tiles:
    (source offsets, destination offsets, bytes, source tiles, destination tiles)."""
    args = [np.ascontiguousarray(np.asarray(a, np.int64)) for a in (sa, da, st, dt)]
    return _runs_kernel(*args, isz)


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
