"""The stages of a reduction after the on-tile one: partial results, one per (tile, output) that
held elements of that output, combined across tiles as popops does (lib/popops/reduction/
ReductionStages.cpp, ReductionPlan.cpp).

A stage moves *regions* of partials, not single values: a tile's partials of consecutive outputs
lie consecutively, and the outputs of a block (consecutive outputs reduced on one tile from the
same source tiles) are received as one run from each source, laid out [sources, outputs] and
summed by one Reduce vertex (PARTIALS layout: poplibs' strided / partials reduction). The
receiving tile's exchange code then grows with its sources, not with sources x outputs.

While the partials are many per output (`another_stage`, calculateNextStep), an intermediate
stage splits each region of outputs into pieces of whole grains, each piece's sources into
groups (`_split`, calculateSplit), and reduces every group on its own tile, round robin; the
final stage gathers what is left on the outputs' tiles. Each receiving tile thus takes a
bounded number of messages.
"""
from __future__ import annotations

import math

import numpy as np

import ipu

# calculateNextStep (ReductionPlan.cpp): another intermediate stage while the partials number
# more than this many per output (the literal 32 of poplibs' first releases, later named
# reductionFactorThresholdToAddMoreStages)
STAGE_FACTOR = 32
# intermediateToIntermediate (ReductionStages.cpp): a piece reduces at least this many partials
# (minPieceSize 64) and at least 2 sources (minPieceRows)
MIN_PIECE_SIZE = 64
MIN_PIECE_ROWS = 2


class Partials:
    """Partial results: entry i is the value at `pos[i]` of `var` (on tile `tile[i]`) for output
    row `row[i]`. Kept sorted by (row, tile)."""

    def __init__(self, var: ipu.Variable, tile, row, pos):
        order = np.lexsort((np.asarray(tile), np.asarray(row)))
        self.var = var
        self.tile = np.asarray(tile, np.int64)[order]
        self.row = np.asarray(row, np.int64)[order]
        self.pos = np.asarray(pos, np.int64)[order]

    def by_row(self, rows: int):
        """(start, count) of every row's entries, and `cont`: row r has the same source tiles as
        row r - 1, each holding its partial of r right after its partial of r - 1 (so a block of
        such rows is one run from each source)."""
        count = np.bincount(self.row, minlength=rows).astype(np.int64)
        start = np.concatenate(([0], np.cumsum(count)[:-1])).astype(np.int64)
        cont = np.zeros(rows, bool)
        cand = np.flatnonzero((count[1:] == count[:-1]) & (count[1:] > 0)) + 1
        if cand.size:
            n = count[cand]
            first = np.cumsum(n) - n
            idx = np.repeat(start[cand], n) + np.arange(int(n.sum())) - np.repeat(first, n)
            prev = idx - np.repeat(n, n)
            ok = (self.tile[idx] == self.tile[prev]) & (self.pos[idx] == self.pos[prev] + 1)
            cont[cand] = np.logical_and.reduceat(ok, first)
        return start, count, cont


def another_stage(target, p: Partials, rows: int) -> bool:
    """popops calculateNextStep: go straight to the outputs when the partials of the busiest
    output come from fewer than 2 sqrt(tiles) tiles and the partials occupy more than 3/4 of the
    tiles; else another intermediate stage while there are more than STAGE_FACTOR partials per
    output."""
    tiles = target.num_tiles
    most = int(np.bincount(p.row, minlength=rows).max()) if p.row.size else 0
    if most < 2 * math.sqrt(tiles) and np.unique(p.tile).size > tiles * 3 // 4:
        return False
    return p.row.size > rows * STAGE_FACTOR


def _grain(op: str, et: ipu.ElementType) -> int:
    """Columns split on multiples of the vector width, doubled for sums (popops' grainSize in
    intermediateToIntermediate: ADD and SQUARE_ADD have instructions twice as wide)."""
    width = max(1, 8 // et.itemsize)
    return 2 * width if op in ("sum", "sum_squares", "abs_sum") else width


def _split(p: Partials, rows: int, grain: int, num_tiles: int):
    """popops calculateSplit: the regions of outputs (runs of rows with the same sources) cut
    into pieces of whole grains (poputil::splitRegions over num_tiles partitions, at least
    minPieceCols columns), and each piece's sources into N groups of about equal size.
    Returns (first row, columns, groups) per piece."""
    start, count, cont = p.by_row(rows)
    total = p.row.size
    region_start = np.flatnonzero(~cont)
    region_len = np.diff(np.append(region_start, rows))
    average_split = max(1, int(math.sqrt(total // rows)))
    min_cols = max(grain, (int(region_len.min()) // grain) // average_split * grain)
    grains = -(-rows // grain)
    per = max(-(-grains // num_tiles) * grain, -(-min_cols // grain) * grain)
    cuts = np.zeros(rows, bool)
    cuts[region_start] = True
    cuts[::per] = True
    first = np.flatnonzero(cuts)
    cols = np.diff(np.append(first, rows))
    sources = count[first]
    ideal = max(total // num_tiles, 1)
    n = np.maximum((sources * cols) // ideal, 1)
    small = (sources * cols) // n < MIN_PIECE_SIZE
    n = np.where(small, (sources * cols) // MIN_PIECE_SIZE, n)
    n = np.maximum(n, 1)
    n = np.where(sources // n < MIN_PIECE_ROWS, sources // MIN_PIECE_ROWS, n)
    n = np.maximum(n, 1)
    return first, cols, n


def _blocks(ctx, p: Partials, rows: int, first_row, cols, src_from, src_count, tiles, dst, dst_index, op_code, name):
    """For each block b: gather the partials of rows first_row[b] .. + cols[b] from its sources
    src_from[b] .. + src_count[b] (in each row's source order) onto tiles[b], laid out [sources,
    cols], and reduce them into dst[dst_index[b] ..] with one Reduce vertex (PARTIALS layout)."""
    from codelets.reduce import PARTIALS

    start, _, _ = p.by_row(rows)
    size = cols * src_count
    offset = np.concatenate(([0], np.cumsum(size)[:-1])).astype(np.int64)
    total = int(size.sum())
    block = np.repeat(np.arange(first_row.size), size)
    local = np.arange(total) - offset[block]
    src = src_from[block] + local // cols[block]
    row = first_row[block] + local % cols[block]
    gathered = ctx.g.add_variable(ctx.name(f"{name}/gathered"), (total,), p.var.dtype, ipu.TEMPORARY,
                                  debug=ctx.name())
    gathered.tile_of[:] = tiles[block]
    ctx.copy(ipu.Tensor(p.var, p.pos[start[row] + src], (total,)), gathered, f"{name}/gather")
    cs = ctx.compute_set(name)
    ctx.g.add_vertices(cs, "Reduce", tiles, {"in": (gathered, offset, size), "out": (dst, dst_index, cols)},
                       ip={"op": op_code, "inner": src_count, "layout": PARTIALS})
    ctx.emit(ipu.Execute(cs, name=cs.name))


def intermediate(ctx, p: Partials, rows: int, op: str, name: str) -> Partials:
    """One intermediate stage (popops intermediateToIntermediate): every piece's groups of
    sources reduced on tiles taken round robin, into new partials (one run per group)."""
    from codelets.reduce import REDUCE_OPS

    num_tiles = ctx.target.num_tiles
    first, cols, n = _split(p, rows, _grain(op, p.var.dtype), num_tiles)
    _, count, _ = p.by_row(rows)
    sources = count[first]
    per_group = np.maximum(-(-sources // n), MIN_PIECE_ROWS)
    groups = -(-sources // per_group)
    g_piece = np.repeat(np.arange(first.size), groups)
    g_index = np.arange(g_piece.size) - np.repeat(np.cumsum(groups) - groups, groups)
    g_from = g_index * per_group[g_piece]
    g_count = np.minimum(per_group[g_piece], sources[g_piece] - g_from)
    g_cols = cols[g_piece]
    g_first = first[g_piece]
    # round robin from where the allocator's small layouts continue (poplibs starts each
    # reduction's stages at a start tile of its own, so reductions do not all begin on tile 0)
    g_tile = (ctx.tiles.take_small_tiles(g_piece.size) + np.arange(g_piece.size)) % num_tiles
    g_offset = np.concatenate(([0], np.cumsum(g_cols)[:-1])).astype(np.int64)
    out = ctx.g.add_variable(ctx.name(f"{name}/partials"), (int(g_cols.sum()),), p.var.dtype, ipu.TEMPORARY,
                             debug=ctx.name())
    out.tile_of[:] = np.repeat(g_tile, g_cols)
    _blocks(ctx, p, rows, g_first, g_cols, g_from, g_count, g_tile, out, g_offset, REDUCE_OPS[op], name)
    e_group = np.repeat(np.arange(g_piece.size), g_cols)
    local = np.arange(out.numel) - g_offset[e_group]
    return Partials(out, g_tile[e_group], g_first[e_group] + local, np.arange(out.numel))


def final(ctx, p: Partials, rows: int, out: ipu.Variable, op: str, name: str) -> None:
    """The last stage (popops intermediateToOutput): each output's partials gathered on its tile;
    consecutive outputs of a tile with the same sources (one run each) form one block."""
    from codelets.reduce import REDUCE_OPS

    start, count, cont = p.by_row(rows)
    out_tile = out.tile_of.astype(np.int64)
    piece = np.searchsorted(out.pieces()[0], np.arange(rows), side="right")
    join = cont.copy()
    join[1:] &= (out_tile[1:] == out_tile[:-1]) & (piece[1:] == piece[:-1])
    join[0] = False
    first = np.flatnonzero(~join)
    cols = np.diff(np.append(first, rows))
    _blocks(ctx, p, rows, first, cols, np.zeros(first.size, np.int64), count[first], out_tile[first], out, first,
            REDUCE_OPS[op], name)
