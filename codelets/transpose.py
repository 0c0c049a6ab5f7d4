"""Transpose2d: transpose matrices held contiguously on one tile (poplibs popops/poplin Transpose2d).

Fields `src` (IN) and `dst` (OUT) of one type and count; int parameters `rows`, `cols`: src holds
`count / (rows x cols)` matrices of rows x cols one after the other (row-major), dst receives each
one transposed (cols x rows). Any element type: the kernel moves elements, it does no arithmetic.

It is how layout changes run without element-by-element exchanges: a transposed operand travels
as contiguous rows of its source (few, long exchange runs) and the tile that receives the block
transposes it locally (`codelets.plans.matmul`, see docs/lowering.md).
"""
from __future__ import annotations

import numpy as np
from numba import njit

import ipu
from ipu import IN, OUT, Codelet, Field


@njit(cache=True)
def _transpose_kernel(views, off, cnt, fp, ip):
    s = views[F.src]
    d = views[F.dst]
    for v in range(off.shape[0]):
        rows = ip[v, IP.rows]
        cols = ip[v, IP.cols]
        size = rows * cols
        if size == 0:
            continue
        a = off[v, F.src]
        b = off[v, F.dst]
        for t in range(cnt[v, F.src] // size):
            # slices first, so the loop indexes from 0 without offsets; destination-order writes
            # (columns outer) measured ~2x faster than source order on blocks of 8x16 to 128x40
            src = s[a + t * size:a + (t + 1) * size]
            dst = d[b + t * size:b + (t + 1) * size]
            for c in range(cols):
                for r in range(rows):
                    dst[c * rows + r] = src[r * cols + c]


def transpose2d_cycles(rows, cols, matrices, itemsize: int) -> np.ndarray:
    """Thread cycles of a Transpose2d worker vertex transposing `matrices` rows x cols matrices.

    Source: poplibs lib/popops/popopsCycleEstimators.cpp, MAKE_CYCLE_ESTIMATOR_NAME(Transpose2d)
    (SDK 3.x), for 4-byte types:
      fast path (rows, cols even, cols / 2 < 4096, rows x (cols - 2) / 2 < 512, rows < 512):
        27 + matrices x (11 + rows / 2 x (6 + 3 x (cols / 2 - 1)))
      otherwise: 13 + matrices x (8 + cols x (5 + rows x 4 / 2))
    and for 2-byte types:
      fast path (rows % 4 == 0, cols % 4 == 0, cols >= 8, cols / 4 < 4096, 1 + 3 x cols / 4 < 512):
        37 + matrices x (12 + rows / 4 x (15 + 4 x (cols / 4 - 2)))
      Nx4 path (rows % 4 == 0, cols == 4, rows / 4 < 4096, 1 + 3 x rows / 4 < 512):
        32 + 15 x matrices when rows == 4, else 28 + matrices x (17 + 20 + 4 x (rows / 4 - 2))
      otherwise: 15 + matrices x (8 + cols x (5 + rows x 5 / 2)).
    1-byte types have no poplibs Transpose2d; they are costed as the 2-byte slow path (assumption:
    the same per-element load/store loop).
    """
    r = np.asarray(rows, np.int64)
    c = np.asarray(cols, np.int64)
    m = np.asarray(matrices, np.int64)
    rpt = 4096  # CSR_W_REPEAT_COUNT mask + 1
    if itemsize == 4:
        fast = ((r % 2) == 0) & ((c % 2) == 0) & (c // 2 < rpt) & (r * np.maximum(c - 2, 0) // 2 < 512) & (r < 512)
        return np.where(fast, 27 + m * (11 + (r // 2) * (6 + 3 * (c // 2 - 1))),
                        13 + m * (8 + c * (5 + (r * 4) // 2)))
    slow = 15 + m * (8 + c * (5 + (r * 5) // 2))
    if itemsize != 2:
        return slow
    fast = ((r % 4) == 0) & ((c % 4) == 0) & (c >= 8) & (c // 4 < rpt) & (1 + 3 * (c // 4) < 512)
    nx4 = ((r % 4) == 0) & (c == 4) & (r // 4 < rpt) & (1 + 3 * (r // 4) < 512)
    nx4_cycles = np.where(r == 4, 32 + 15 * m, 28 + m * (17 + (20 + 4 * (r // 4 - 2))))
    return np.select([fast, nx4], [37 + m * (12 + (r // 4) * (15 + 4 * (c // 4 - 2))), nx4_cycles], slow)


@ipu.register
class Transpose2d(Codelet):
    """dst[t] = src[t].T for each rows x cols matrix t."""

    name = "Transpose2d"
    fields = (Field("src", IN), Field("dst", OUT))
    int_params = ("rows", "cols")
    supervisor = False
    takes_float8 = True  # it moves bytes, it does no arithmetic
    poplibs_vertices = ("popops::Transpose2d",)

    def kernel(self):
        return _transpose_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if t.type.src != t.type.dst:
            raise TypeError(f"Transpose2d: src is {t.type.src.name} but dst is {t.type.dst.name}")
        if np.any(t.count.src != t.count.dst):
            raise ValueError("Transpose2d: src and dst must have the same number of elements")
        size = t.rows * t.cols
        if (np.any(ip < 0) or np.any((size == 0) & (t.count.src > 0))
                or np.any(t.count.src % np.maximum(size, 1))):
            raise ValueError("Transpose2d: the field size must be a whole number of rows x cols matrices")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        size = np.maximum(t.rows * t.cols, 1)
        return transpose2d_cycles(t.rows, t.cols, t.count.src // size, t.type.src.itemsize)

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        rows, cols, mats = (int(params[x]) for x in ("rows", "cols", "matrices"))
        if rows * cols * mats != n:
            raise KeyError(f"n ({n}) must be rows x cols x matrices")
        return ipu.Vertex({"src": t, "dst": t}, {"src": n, "dst": n}, {"rows": rows, "cols": cols})

    def code_bytes(self, types):
        # the popops Transpose2d worker (fast and slow loops): ~0.4 KiB (assumption)
        return 384

    def reference(self, src, rows, cols):
        src = np.asarray(src)
        return src.reshape(-1, rows, cols).transpose(0, 2, 1).reshape(-1).copy()


F, IP = Transpose2d.F, Transpose2d.IP  # the kernel's columns, by name
