"""Moving a matmul's operand blocks to the tiles of its plan's cells (matmul_build.py builds the
rest of the product).

Each cell's block of an operand is gathered by one Copy: a view of the operand through an index
array or `IndexRuns` (one run per block row when the rows are contiguous), so strided operands need
no extra copy and a source several tiles need is sent once (the exchange multicasts). A transposed
operand (a view running down its rows: autodiff's A^T and B^T, attention's K^T) crosses the
exchange in its own order and is transposed on the tiles by Transpose2d vertices, either on each
receiving tile (`_exchange_operand`) or, when several tiles share a block, once before the
multicast (`_regroup`).
"""
from __future__ import annotations

import numpy as np

import ipu
from ipu.tensor import TEMPORARY, IndexBlocks, IndexRuns


def _blocks_variable(graph, name, dtype, tiles, sizes):
    """A temporary holding one contiguous block per cell on the cell's tile; returns (var, offsets)."""
    sizes = np.asarray(sizes, np.int64)
    off = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    total = int(sizes.sum())
    var = graph.add_variable(name, (total,), dtype, category=TEMPORARY)
    if total:
        var.set_tile_runs(tiles, sizes)  # one run per cell: no per-element tile table
    return var, off


def _merged_runs(tiles, counts):
    """(tiles, counts) with empty runs dropped and neighbouring runs on one tile joined."""
    tiles = np.asarray(tiles, np.int64)[np.asarray(counts) > 0]
    counts = np.asarray(counts, np.int64)[np.asarray(counts) > 0]
    if tiles.size == 0:
        return tiles, counts
    first = np.flatnonzero(np.concatenate(([True], tiles[1:] != tiles[:-1])))
    return tiles[first], np.add.reduceat(counts, first)


# Positions as NumPy strides, with no memory: a read-only array over one byte whose element [i...]
# sits at byte offset = its flat position in the shape it was made with. Views of it (transposes,
# slices, reshapes that need no copy) then say, per block of an operand, where its elements are
# (start and strides) without an index array of the operand's size. Its values are never read.
_PROBE_BASE = np.zeros(1, np.uint8)


def position_probe(shape) -> np.ndarray:
    shape = tuple(int(d) for d in shape)
    strides = [1] * len(shape)
    for a in range(len(shape) - 2, -1, -1):
        strides[a] = strides[a + 1] * shape[a + 1]
    return np.lib.stride_tricks.as_strided(_PROBE_BASE, shape=shape, strides=tuple(strides), writeable=False)


def probe_offset(view: np.ndarray) -> int:
    """The flat position of view's first element (a view of a position_probe)."""
    return int(view.__array_interface__["data"][0] - _PROBE_BASE.__array_interface__["data"][0])


def reshape_view(x: np.ndarray, shape) -> np.ndarray:
    """x reshaped without copying (ValueError or AttributeError when that needs a copy): how a
    position probe is reshaped, since a copy would read it."""
    try:
        return np.reshape(x, shape, copy=False)
    except TypeError:  # NumPy < 2.1 has no copy argument: setting the shape never copies
        v = x.view()
        v.shape = shape
        return v


def probe_blocks(src3: np.ndarray, cells, axes):
    """(e0, es, box) of every non-empty cell's block src3[g0:g0+gs, r0:r0+rs, c0:c0+cs] of a
    position probe src3: the block's first position, its strides and its shape; and the storage
    (p0, ps) that holds the blocks one after another in cell order, each row-major."""
    (r0k, rsk), (c0k, csk) = axes
    box = np.stack([cells["gs"], cells[rsk], cells[csk]], axis=1).astype(np.int64)
    sizes = box.prod(axis=1)
    live = sizes > 0
    st = np.asarray(src3.strides, np.int64)  # bytes of a one-byte dtype: positions
    e0 = probe_offset(src3) + cells["g0"] * st[0] + cells[r0k] * st[1] + cells[c0k] * st[2]
    p0 = np.cumsum(sizes) - sizes
    ps = np.stack([box[:, 1] * box[:, 2], box[:, 2], np.ones(box.shape[0], np.int64)], axis=1)
    es = np.broadcast_to(st, box.shape)
    return e0[live], es[live], box[live], p0[live], ps[live]


def _in_place_by_blocks(src, canon, prob, cells, axes) -> bool | None:
    """Whether `src`, whose index is kept as IndexBlocks, holds the plan's blocks in order (None
    when its shape cannot be probed without a copy: the caller expands the index)."""
    try:
        src3 = canon(position_probe(src.shape), prob, reshape=reshape_view)
    except (ValueError, AttributeError):
        return None
    e0, es, box, p0, ps = probe_blocks(src3, cells, axes)
    want = IndexBlocks(e0, es, p0, ps, box)
    have = src.blocks
    if want.e0.size != have.e0.size:
        return False
    i, j = np.argsort(want.e0, kind="stable"), np.argsort(have.e0, kind="stable")
    return all(np.array_equal(getattr(want, f)[i], getattr(have, f)[j]) for f in ("e0", "es", "p0", "ps", "box"))


def blocks_in_place(src, canon, prob, cells, axes, sizes):
    """The variable of operand view `src` when its storage already is the plan's blocks (a variable
    its consumer created: popxl/lowering/creators.py): every cell's block [g, r, c] row-major, one
    after another in cell order, each on its cell's tile. Else None (the blocks must be gathered).
    `canon` (matmul_plan._canon_a / _canon_b) makes the operand's index (groups, rows, cols)."""
    var = src.variable
    total = int(np.sum(sizes))
    if total == 0 or var.numel != total or var.unmapped():
        return None
    want_t, want_c = _merged_runs(cells["tile"], sizes)
    starts, stops, tiles = var.pieces()
    have_t, have_c = _merged_runs(tiles, stops - starts)
    if not (np.array_equal(want_t, have_t) and np.array_equal(want_c, have_c)):
        return None
    if src.blocks is not None:  # kept block by block: compared without expanding it
        same = _in_place_by_blocks(src, canon, prob, cells, axes)
        if same is not None:
            return var if same else None
    index = _gather(canon(src.index(), prob), cells, axes)
    if isinstance(index, IndexRuns):
        starts, lengths = index.starts.astype(np.int64), index.lengths.astype(np.int64)
        return var if np.array_equal(starts, np.cumsum(lengths) - lengths) else None
    return var if np.array_equal(index, np.arange(total, dtype=np.int64)) else None


def _gather(src3, cells, axes):
    """Concatenated flat blocks src3[g0:g0+gs, r0:r0+rs, c0:c0+cs] of every cell: an IndexRuns
    (one run per block row) when the source's rows are consecutive elements, so host memory grows
    with the rows a plan moves rather than its elements; else an index array.

    Cells come in a few block shapes (the edge cells of each dimension are smaller): per shape, the
    blocks are one index pattern shifted by each block's origin, gathered in one indexing step."""
    (r0k, rsk), (c0k, csk) = axes
    G, R, C = src3.shape
    sizes = cells["gs"] * cells[rsk] * cells[csk]
    total = int(sizes.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    flat_src = np.ascontiguousarray(src3).reshape(-1)
    shape_key = (cells["gs"] * (R + 1) + cells[rsk]) * (C + 1) + cells[csk]
    keys = np.unique(shape_key[sizes > 0])
    rows_contiguous = C > 1 and bool(np.all(src3[..., 1:] - src3[..., :-1] == 1))
    if rows_contiguous:
        nrows = np.where(sizes > 0, cells["gs"] * cells[rsk], 0)
        roff = np.cumsum(nrows) - nrows
        starts = np.empty(int(nrows.sum()), np.int64)
        lengths = np.empty(starts.size, np.int64)
        for key in keys:
            sel = np.flatnonzero(shape_key == key)
            gs, rs, cs = int(cells["gs"][sel[0]]), int(cells[rsk][sel[0]]), int(cells[csk][sel[0]])
            row_pattern = ((np.arange(gs)[:, None] * R + np.arange(rs)[None, :]) * C).reshape(-1)
            origin = (cells["g0"][sel] * R + cells[r0k][sel]) * C + cells[c0k][sel]
            where = (roff[sel][:, None] + np.arange(gs * rs)[None, :]).reshape(-1)
            starts[where] = flat_src[(origin[:, None] + row_pattern[None, :]).reshape(-1)]
            lengths[where] = cs
        return IndexRuns(starts, lengths)
    off = np.cumsum(sizes) - sizes
    out = np.empty(total, flat_src.dtype)
    for key in keys:
        sel = np.flatnonzero(shape_key == key)
        gs, rs, cs = int(cells["gs"][sel[0]]), int(cells[rsk][sel[0]]), int(cells[csk][sel[0]])
        blk = gs * rs * cs
        pattern = ((np.arange(gs)[:, None, None] * R + np.arange(rs)[None, :, None]) * C
                   + np.arange(cs)[None, None, :]).reshape(-1)
        origin = (cells["g0"][sel] * R + cells[r0k][sel]) * C + cells[c0k][sel]
        out[(off[sel][:, None] + np.arange(blk)[None, :]).reshape(-1)] = \
            flat_src[(origin[:, None] + pattern[None, :]).reshape(-1)]
    return out


def _view(variable, index):
    """A flat view of `variable` through an index array or IndexRuns."""
    n = index.size if isinstance(index, IndexRuns) else int(np.asarray(index).size)
    return ipu.Tensor(variable, index, (n,))


def _mean_run(x, axis: int) -> float:
    """Mean length of the runs of consecutive source elements along `axis` of x [G, R, C]."""
    n = x.size
    pairs = np.count_nonzero(np.diff(x, axis=axis) == 1)
    return n / max(n - pairs, 1)


def _is_transposed(src3, itemsize: int) -> bool:
    """True when a canonical operand [G, R, C] runs through its source down its columns, in runs
    at least twice as long as along its rows and of at least 32 bytes: a transposed view
    (autodiff's B^T and A^T, attention's K^T) or one transposed in pieces (a batch's im2col windows
    [N x P, C]: a run down each image's positions, then a jump to the next image). Gathered row by
    row its blocks would cross the exchange one element a run; in the source's order they cross as
    runs as long as the column pieces, and Transpose2d vertices reorder them on the tiles. Short
    runs down (a stride-2 convolution's windows: one per kernel row) are not worth the transpose.
    Measured on up to 8 matrices of the batch (they share a pattern)."""
    G, R, C = src3.shape
    if G == 0 or R < 2 or C < 2:
        return False
    x = src3[:8]
    down, along = _mean_run(x, 1), _mean_run(x, 2)
    return down >= 2 * along and down * itemsize >= _MIN_REGROUP_BYTES


_MIN_BAND = 32  # elements: shortest exchange run a band split may make
_MIN_REGROUP_BYTES = 32  # shortest exchange run of a regrouping (_regroup): 8 floats, 16 halves


def _band_sources(src_t, g, c, r, rows, cols, off, total):
    """The source element of every band of a transposed operand, in the source's order: band i is
    src_t[g[i], c[i]:c[i] + rows[i], r[i]:r[i] + cols[i]] (src_t: the operand as [G, C, R], its
    rows contiguous), flattened to positions off[i]... of a `total`-element array; one fancy
    index per band shape."""
    flat = np.empty(total, np.int64)
    shape_key = rows * (int(cols.max(initial=0)) + 1) + cols
    for key in np.unique(shape_key):
        sel = np.flatnonzero(shape_key == key)
        R, C = int(rows[sel[0]]), int(cols[sel[0]])
        blk = src_t[g[sel][:, None, None], c[sel][:, None, None] + np.arange(R)[None, :, None],
                    r[sel][:, None, None] + np.arange(C)[None, None, :]]
        flat[(off[sel][:, None] + np.arange(R * C)[None, :]).reshape(-1)] = blk.reshape(-1)
    return flat


def _exchange_operand(graph, seq, src, src3, cells, axes, blocks, off, sizes, name):
    """Copy every cell's operand block [g, r, c] (row-major) into `blocks` on the cell's tile.

    A transposed source moves as poplibs moves it: each block crosses the exchange in the source's
    own order ([g, c, r]: runs as long as a block's rows, so little exchange code) into a staging
    block on the destination tile, and Transpose2d vertices (one per band of the block's rows, so
    all six workers share a block) turn it into [g, r, c] there (cycles from the poplibs
    estimator, codelets/transpose.py)."""
    if not _is_transposed(src3, blocks.dtype.itemsize):
        seq.add(ipu.Copy(_view(src.variable, _gather(src3, cells, axes)), blocks, name=name))
        return
    if _regroup(graph, seq, src, src3, cells, axes, blocks, name):
        return
    (r0k, rsk), (c0k, csk) = axes
    # every cell's block is staged as up to 6 bands of its rows (one per worker), each band [c, r]
    # in source order; a band's Transpose2d writes rows of the block, which are contiguous there.
    # Bands are at least _MIN_BAND rows wide: narrower ones would cut the exchange runs short.
    workers = graph.target.worker_contexts
    src_t = src3.transpose(0, 2, 1)
    # one vertex per (cell, matrix of the cell, band), in staging order
    sizes = np.asarray(sizes)
    gs, rs, cs = cells["gs"], cells[rsk], cells[csk]
    live = np.flatnonzero(gs * rs * cs > 0)
    bands = np.maximum(1, np.minimum(rs[live] // _MIN_BAND, -(-workers // np.maximum(gs[live], 1))))
    per_cell = gs[live] * bands
    cell = np.repeat(live, per_cell)
    k = np.arange(cell.size) - np.repeat(np.cumsum(per_cell) - per_cell, per_cell)
    nb = np.repeat(bands, per_cell)
    g_local, band = k // nb, k % nb
    b0 = rs[cell] * band // nb
    b1 = rs[cell] * (band + 1) // nb
    v_rows, v_cols = cs[cell], b1 - b0
    v_off = off[cell] + g_local * rs[cell] * cs[cell] + b0 * cs[cell]
    v_tile = cells["tile"][cell]
    g_abs, c_abs, r_abs = cells["g0"][cell] + g_local, cells[c0k][cell], cells[r0k][cell] + b0
    flat = _band_sources(src_t, g_abs, c_abs, r_abs, v_rows, v_cols, v_off, int(sizes.sum()))
    parts = v_tile.size
    stage, _ = _blocks_variable(graph, f"{name}/stage", blocks.dtype, cells["tile"], sizes)
    seq.add(ipu.Copy(ipu.Tensor(src.variable, flat, flat.shape), stage, name=name))
    if not parts:
        return
    cs_ = graph.add_compute_set(f"{name}/transpose")
    field = (v_off, v_rows * v_cols)
    graph.add_vertices(cs_, "Transpose2d", v_tile, {"src": (stage, *field), "dst": (blocks, *field)},
                       ip={"rows": v_rows, "cols": v_cols})
    seq.add(ipu.Execute(cs_, name=f"{name}/transpose"))


def _regroup(graph, seq, src, src3, cells, axes, blocks, name) -> bool:
    """Transpose a transposed operand once, before it is multicast, when several cells share a
    block (what poplibs does with a badly laid out operand: it is rearranged once, on the tiles,
    ahead of the exchange, not on every tile that receives it). Returns False, doing nothing,
    when no block is shared.

    Each distinct block [g, r, c] is cut into bands of its rows, one per tile that needs the block;
    a band crosses a first exchange in the source's order into a staging area on that tile, where
    Transpose2d vertices (the band cut further into up to one piece per worker) write it into
    `regrouped`, the operand's blocks laid out row-major. The block then reaches every tile that
    needs it as a few long runs (one per band), as an operand that was not transposed does. Each
    element is transposed once instead of once per receiving tile: for the weight gradient of
    an MNIST step (x^T @ dh, blocks shared by 16 tiles) the transposes went from 14,616 cycles
    on one worker to a few hundred, and the host moves a sixteenth of the bytes through them."""
    (r0k, rsk), (c0k, csk) = axes
    gs, rs, cs = cells["gs"], cells[rsk], cells[csk]
    live = np.flatnonzero(gs * rs * cs > 0)
    if live.size == 0:
        return False
    key = np.stack([cells["g0"][live], cells[r0k][live], cells[c0k][live]], 1)
    _, first, block_of = np.unique(key, axis=0, return_index=True, return_inverse=True)
    block_of = block_of.reshape(-1)
    fan = np.bincount(block_of)
    if fan.max(initial=0) < 2:
        return False
    workers = graph.target.worker_contexts
    min_rows = max(1, _MIN_REGROUP_BYTES // blocks.dtype.itemsize)
    d_cell = live[first]  # a cell holding each distinct block, for its origin and size
    d_gs, d_rs, d_cs = gs[d_cell], rs[d_cell], cs[d_cell]
    d_rows = d_gs * d_rs
    d_size = d_rows * d_cs
    d_start = np.cumsum(d_size) - d_size  # the blocks one after another in `regrouped`
    # bands: block d is cut into nb <= f bands of at least min_rows rows (each row of a band is
    # one exchange run); the j-th cell (in cell order) sharing the block takes band j, if any
    order = np.argsort(block_of, kind="stable")
    band_cell = live[order]
    band_d = block_of[order]
    j = np.arange(order.size) - np.repeat(np.cumsum(fan) - fan, fan)
    nb = np.clip(d_rows // min_rows, 1, fan)[band_d]
    j = np.minimum(j, nb)
    a = d_rows[band_d] * j // nb
    b = d_rows[band_d] * np.minimum(j + 1, nb) // nb
    band_tile = cells["tile"][band_cell]
    band_size = (b - a) * d_cs[band_d]
    # pieces: each band in up to `workers` row ranges of at least min_rows rows, then cut
    # where a matrix of the block ends
    nsub = np.clip((b - a) // min_rows, 1, workers)
    sub_band = np.repeat(np.arange(a.size), nsub)
    k = np.arange(sub_band.size) - np.repeat(np.cumsum(nsub) - nsub, nsub)
    lo = a[sub_band] + (b - a)[sub_band] * k // nsub[sub_band]
    hi = a[sub_band] + (b - a)[sub_band] * (k + 1) // nsub[sub_band]
    keep = hi > lo
    sub_band, lo, hi = sub_band[keep], lo[keep], hi[keep]
    rows_of = d_rs[band_d[sub_band]]
    cuts = (hi - 1) // rows_of - lo // rows_of + 1  # matrices each row range touches
    piece_sub = np.repeat(np.arange(lo.size), cuts)
    m = np.arange(piece_sub.size) - np.repeat(np.cumsum(cuts) - cuts, cuts)
    g_local = lo[piece_sub] // rows_of[piece_sub] + m
    p_lo = np.maximum(lo[piece_sub], g_local * rows_of[piece_sub])
    p_hi = np.minimum(hi[piece_sub], (g_local + 1) * rows_of[piece_sub])
    p_band = sub_band[piece_sub]
    p_d = band_d[p_band]
    p_cols = d_cs[p_d]  # a piece is [cols of the block, its rows] in the source's order
    p_rows = p_hi - p_lo
    p_off = d_start[p_d] + p_lo * p_cols
    p_tile = band_tile[p_band]
    # the source elements of every piece, in the source's order, one fancy index per piece shape
    src_t = src3.transpose(0, 2, 1)
    g_abs = cells["g0"][d_cell][p_d] + g_local
    r_abs = cells[r0k][d_cell][p_d] + p_lo - g_local * rows_of[piece_sub]
    c_abs = cells[c0k][d_cell][p_d]
    flat = _band_sources(src_t, g_abs, c_abs, r_abs, p_cols, p_rows, p_off, int(d_size.sum()))
    # bands in order of (block, sharer) cover `regrouped` from start to end
    regrouped, _ = _blocks_variable(graph, f"{name}/regrouped", blocks.dtype, band_tile, band_size)
    stage, _ = _blocks_variable(graph, f"{name}/regroup stage", blocks.dtype, band_tile, band_size)
    seq.add(ipu.Copy(ipu.Tensor(src.variable, flat, flat.shape), stage, name=f"{name}/regroup"))
    cs_ = graph.add_compute_set(f"{name}/transpose")
    field = (p_off, p_cols * p_rows)
    graph.add_vertices(cs_, "Transpose2d", p_tile, {"src": (stage, *field), "dst": (regrouped, *field)},
                       ip={"rows": p_cols, "cols": p_rows})
    seq.add(ipu.Execute(cs_, name=f"{name}/transpose"))
    # every cell's block: one range of `regrouped` (on the tiles of its bands)
    d_of_cell = np.empty(gs.size, np.int64)
    d_of_cell[live] = block_of
    runs = IndexRuns(d_start[d_of_cell[live]], d_size[d_of_cell[live]])
    seq.add(ipu.Copy(_view(regrouped, runs), blocks, name=name))
    return True
