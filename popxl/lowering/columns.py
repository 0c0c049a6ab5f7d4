"""Column-block layouts for data-dependent indexing (the tile plan of popops::multiSlice).

Exchanges are fixed at compile time, so a lookup by a run-time index must find its row on the
tile that asks. A table of G groups x `rows` x D columns is therefore spread over tiles by
*columns*: every tile holds all the rows of a few consecutive columns of one group (a block,
stored row-major, rows x width elements), and the small index tensor is broadcast to each tile
(one exchange, multicast). Each block then does its lookups or updates locally. Tensors of the
same column split with another number of rows (the gathered output, the updates of a scatter)
use the same blocks, so they never cross tiles either.

`ColumnPlan(ctx, groups, cols, rows, itemsize)` decides the blocks; `place` lays a (G, R, D) view
out in blocks (a Copy, skipped when the view already is laid out so), `variable` makes an empty
one, `broadcast` copies per-group index rows to every (tile, group) pair that needs them.
"""
from __future__ import annotations

import numpy as np

import ipu

from .mapping import MIN_BYTES_PER_TILE


def _next_tile(ctx, used: int) -> int:
    """Successive small layouts start on successive tiles (shared with the mapping policy)."""
    return ctx.tiles.take_small_tiles(used)


class ColumnPlan:
    def __init__(self, ctx, groups: int, cols: int, rows: int, itemsize: int, split_for_workers: bool = True):
        self.ctx = ctx
        self.groups = int(groups)
        self.cols = int(cols)
        T = ctx.target.num_tiles
        W = ctx.target.worker_contexts if split_for_workers else 1
        total = self.groups * self.cols
        per_tile, ntiles = self.columns_per_tile(T, self.groups, self.cols, rows, itemsize)
        start = _next_tile(ctx, ntiles)
        g_l, c0_l, w_l, t_l = [], [], [], []
        for k in range(ntiles):
            a, b = k * per_tile, min(total, (k + 1) * per_tile)
            tile = (start + k) % T
            c = a
            while c < b:
                g = c // self.cols
                end = min(b, (g + 1) * self.cols)
                n = end - c
                parts = min(W, n)
                base, extra = divmod(n, parts)
                x = c
                for p in range(parts):
                    w = base + (1 if p < extra else 0)
                    g_l.append(g)
                    c0_l.append(x - g * self.cols)
                    w_l.append(w)
                    t_l.append(tile)
                    x += w
                c = end
        self.group = np.asarray(g_l, np.int64)
        self.c0 = np.asarray(c0_l, np.int64)
        self.width = np.asarray(w_l, np.int64)
        self.tile = np.asarray(t_l, np.int64)
        self.num_blocks = len(g_l)
        # blocks per tile (how many workers the tile's blocks already keep busy)
        self.blocks_on_tile = np.bincount(self.tile, minlength=T)[self.tile] if self.num_blocks else self.tile
        # the (tile, group) pairs that need a copy of that group's indices
        keys = self.tile * max(self.groups, 1) + self.group
        uniq, self.pair = np.unique(keys, return_inverse=True)
        self.pair_tile = uniq // max(self.groups, 1)
        self.pair_group = uniq % max(self.groups, 1)

    @staticmethod
    def columns_per_tile(num_tiles: int, groups: int, cols: int, rows: int, itemsize: int) -> tuple:
        """(columns per tile, tiles used) of a plan: every tile used holds at least
        MIN_BYTES_PER_TILE of the table (fewer, larger blocks for short tables), and the columns
        are spread as evenly as that allows."""
        total = int(groups) * int(cols)
        min_cols = max(1, -(-MIN_BYTES_PER_TILE // max(1, int(rows) * itemsize)))
        per_tile = max(-(-total // num_tiles), min_cols) if total else 1
        return per_tile, (-(-total // per_tile) if total else 0)

    # -- layouts -------------------------------------------------------------------------------
    def starts(self, rows: int) -> np.ndarray:
        """First element of every block in a layout with `rows` rows."""
        return np.concatenate(([0], np.cumsum(self.width * rows)[:-1])).astype(np.int64)

    def positions(self, rows: int) -> np.ndarray:
        """(G, rows, D) array: where each logical element sits in a layout with `rows` rows."""
        G, D = self.groups, self.cols
        if self.num_blocks == 0:
            return np.zeros((G, rows, D), np.int64)
        starts = self.starts(rows)
        # per logical column (g, c): its block, its place in the block
        col_block = np.empty(G * D, np.int64)
        col_j = np.empty(G * D, np.int64)
        for b in range(self.num_blocks):
            gc = self.group[b] * D + self.c0[b]
            col_block[gc:gc + self.width[b]] = b
            col_j[gc:gc + self.width[b]] = np.arange(self.width[b])
        r = np.arange(rows, dtype=np.int64)[:, None]
        pos = starts[col_block][None, :] + r * self.width[col_block][None, :] + col_j[None, :]
        return pos.reshape(rows, G, D).transpose(1, 0, 2)

    def variable(self, name: str, rows: int, et) -> tuple:
        """An empty layout with `rows` rows: (variable, (G, rows, D) view of it)."""
        ctx = self.ctx
        n = self.groups * rows * self.cols
        v = ctx.g.add_variable(ctx.name(name), (n,), et, ipu.TEMPORARY, debug=ctx.name())
        if n:
            v.tile_of[:] = np.repeat(self.tile, self.width * rows).astype(np.int32)
        pos = self.positions(rows)
        return v, ipu.Tensor(v, pos, pos.shape)

    def place(self, view: ipu.Tensor, name: str, fresh: bool = False) -> tuple:
        """`view` (G, R, D) laid out in blocks: (variable, view of it shaped like `view`). No copy
        when `view` already is such a layout, unless `fresh`: a vertex will write the result and
        `view` must keep its value (an op that is not in place)."""
        rows = view.shape[1]
        pos = self.positions(rows)
        var = view.variable
        n = self.groups * rows * self.cols
        if not fresh and var.numel == n and n and np.array_equal(view.flat_index(), pos.reshape(-1)) and \
                np.array_equal(var.tile_of, np.repeat(self.tile, self.width * rows)):
            return var, ipu.Tensor(var, pos, pos.shape)
        v, vv = self.variable(name, rows, view.dtype)
        self.ctx.copy(view, vv, name)
        return v, vv

    def broadcast(self, index: ipu.Tensor, name: str) -> ipu.Variable:
        """index (G, M): a variable (pairs, M) holding row `pair_group[p]` on tile `pair_tile[p]`;
        block b reads row `pair[b]`. One exchange; each source element is sent once (multicast)."""
        ctx = self.ctx
        m = index.shape[1]
        npairs = len(self.pair_tile)
        v = ctx.g.add_variable(ctx.name(name), (npairs, m), index.dtype, ipu.TEMPORARY, debug=ctx.name())
        if npairs * m:
            v.tile_of[:] = np.repeat(self.pair_tile, m).astype(np.int32)
            src = ipu.Tensor(index.variable, index.index()[self.pair_group], (npairs, m))
            ctx.copy(src, v, name)
        return v


def split(n: int, parts: int):
    """(starts, counts) of n items in `parts` nearly equal consecutive runs (no empty runs)."""
    parts = max(1, min(int(parts), int(n))) if n else 1
    base, extra = divmod(int(n), parts)
    counts = np.full(parts, base, np.int64)
    counts[:extra] += 1
    starts = np.concatenate(([0], np.cumsum(counts)[:-1])).astype(np.int64)
    return starts, counts
