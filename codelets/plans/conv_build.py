"""The programs of grouped and depthwise convolutions, following a plan (conv_plan.py).

Forward pass (`build_forward`): one exchange brings every tile the input window of its
sub-convolution (its conv groups' input channels, its batch elements, the input rows its output
rows read, halo included; whole NCHW rows, so the exchange moves long runs), one brings its
weights (a block of the weight tensor shared by the tiles of the same groups, sent once by
multicast), and one compute set runs a ConvPartialHorizontalMac vertex per tile, whose regions are
its batch elements (poplin folds the batch into the field), writing the output in place: the
output is mapped so that each tile's block is contiguous (a float16 output gets float partials
first and a Cast).

Weight update (`build_weight_update`): the input window and the output gradients of each tile's
groups and share of the reduction (batch elements, output rows) come in two exchanges, a
ConvPartialVerticalMac vertex per tile sums them into float partials of the weight gradient, and
when the reduction is split (or the weights are float16) the partials cross one more exchange and
MatMulReducePartials (poplin's ReduceAdd) adds them where the gradient lives.

Work lists are built per distinct sub-field (tiles whose output rows start at the same place share
them) and stored as one constant on every tile that runs them.
"""
from __future__ import annotations

import numpy as np

import ipu
from ipu.tensor import IndexRuns

from ..conv import hmac_worklists, list_dtype, pack_worklists, vmac_worklists, worker_summary
from .conv_plan import ConvPlan, ConvProblem, plan_forward, plan_weight_update
from .matmul_build import _reserved_bytes
from .matmul_operands import _blocks_variable, _view

__all__ = ["build_forward", "build_weight_update", "problem_of"]


def problem_of(x_shape, w_shape, out_shape, groups, strides, dilations, pads) -> ConvProblem:
    """The ConvProblem of x (N, C, *S) convolved with w (M, C / groups, *K) into out (N, M, *O)."""
    N, C = int(x_shape[0]), int(x_shape[1])
    M = int(w_shape[0])
    nsp = len(x_shape) - 2
    return ConvProblem(N, int(groups), C // groups, M // groups, tuple(int(s) for s in x_shape[2:]),
                       tuple(int(k) for k in w_shape[2:]), tuple(int(s) for s in strides[:nsp]),
                       tuple(int(d) for d in dilations[:nsp]), tuple(int(q) for q in pads[:nsp]),
                       tuple(int(o) for o in out_shape[2:]))


def _grid(parts, chunks, sizes):
    """Origins and extents of every cell of a split grid (C order), and the tile of each cell
    (the cells spread evenly over the tiles)."""
    idx = np.meshgrid(*[np.arange(q) for q in parts], indexing="ij")
    idx = [a.ravel() for a in idx]
    origin = [i * c for i, c in zip(idx, chunks)]
    extent = [np.clip(s - o, 0, c) for o, c, s in zip(origin, chunks, sizes)]
    return origin, extent


def _in_row_range(p: ConvProblem, r0: int, rn: int):
    """The input rows (of spatial dimension 0) that output rows [r0, r0 + rn) read."""
    if rn <= 0:
        return 0, 0
    lo = max(0, r0 * p.strides[0] - p.pads[0])
    hi = min(p.in_sp[0], (r0 + rn - 1) * p.strides[0] - p.pads[0] + (p.kernel[0] - 1) * p.dilations[0] + 1)
    return lo, max(lo, hi)


def _runs_of_cells(reps):
    """Cells with reps[i] runs each, enumerated: for every run, its cell and its index in the cell."""
    rc = np.repeat(np.arange(len(reps)), reps)
    return rc, np.arange(int(reps.sum())) - np.repeat(np.cumsum(reps) - reps, reps)


def _in_row_ranges(p: ConvProblem, r0, rn):
    """_in_row_range of every cell: the first input row each reads and how many."""
    ranges = [_in_row_range(p, int(a), int(n)) for a, n in zip(r0, rn)]
    lo = np.array([r[0] for r in ranges], np.int64).reshape(len(ranges))
    return lo, np.array([r[1] for r in ranges], np.int64).reshape(len(ranges)) - lo


def _gather(src: ipu.Tensor, starts, lengths):
    """A flat view of `src` (an (..., rows...) NCHW view) reading the runs (starts, lengths) of its
    row-major element order: runs of the variable when the view is the whole variable, else the
    elements its index array gives."""
    starts = np.asarray(starts, np.int64)
    lengths = np.asarray(lengths, np.int64)
    keep = lengths > 0
    starts, lengths = starts[keep], lengths[keep]
    if src.is_identity:
        return _view(src.variable, IndexRuns(starts, lengths))
    flat = src.flat_index()
    pos = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(int(lengths.sum()))
    return _view(src.variable, flat[pos])


def _worklist_constant(graph, name, tiles, tables):
    """One constant holding every tile's work-list table, each on its tile."""
    sizes = np.asarray([t.size for t in tables], np.int64)
    data = np.concatenate(tables) if tables else np.zeros(0, np.int64)
    et = list_dtype(data)
    const = graph.add_constant(name, data.astype(et.numpy), et)
    if data.size:
        const.set_tile_runs(tiles, sizes)
    off = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    return const, off, sizes


def build_forward(graph: ipu.Graph, x: ipu.Tensor, w: ipu.Tensor, y: ipu.Variable, p: ConvProblem,
                  plan: ConvPlan | None = None, name: str = "conv",
                  available_memory_proportion: float | None = None) -> ipu.Program:
    """y = the grouped convolution of x with w (problem p); y is an unmapped variable of the
    output's shape, which this maps (each tile's output block contiguous)."""
    target = graph.target
    dtype = x.dtype
    if plan is None:
        plan = plan_forward(p, dtype, target, reserved_bytes=_reserved_bytes(graph),
                            available_memory_proportion=available_memory_proportion)
    seq = ipu.Sequence(name=name)
    if y.numel == 0:
        return seq
    G, Cg, Mg, N = p.G, p.Cg, p.Mg, p.N
    M, C = G * Mg, G * Cg
    K = p.kernel_size
    HO = p.out_rows
    orow, irow = p.out_row_len, p.in_row_len
    H = p.in_sp[0]
    (n0, g0, m0, r0), (nn, gn, mn, rn) = _grid(plan.parts, plan.chunks, (N, G, Mg, HO))
    cells = n0.size
    T = target.num_tiles
    tiles = np.arange(cells, dtype=np.int64) * T // cells

    # the output: a run per (cell, batch element), contiguous in NCHW
    cell_of = np.repeat(np.arange(cells), nn)
    n_of = np.concatenate([np.arange(a, a + b) for a, b in zip(n0, nn)]) if cells else np.zeros(0, np.int64)
    vt = tiles[cell_of]
    out_start = ((n_of * M + g0[cell_of] * Mg + m0[cell_of]) * HO + r0[cell_of]) * orow
    out_size = gn[cell_of] * mn[cell_of] * rn[cell_of] * orow
    order = np.argsort(out_start, kind="stable")
    part = y
    if y.dtype != ipu.FLOAT32:  # float partials, cast into y afterwards
        part = graph.add_variable(f"{name}/partials", y.shape, ipu.FLOAT32, ipu.TEMPORARY, debug=y.debug)
    for v in (y, part) if part is not y else (y,):
        v.set_tile_runs(vt[order], out_size[order])

    # the input windows: [batch][group][channel][input rows][rest], one run per (n, channel)
    in_lo, in_n = _in_row_ranges(p, r0, rn)
    in_blk = gn * Cg * in_n * irow  # per batch element
    in_buf, in_off = _blocks_variable(graph, f"{name}/in_window", dtype, tiles, nn * in_blk)
    # runs: cell, n, group-in-cell, channel
    reps = nn * gn * Cg
    rc, k = _runs_of_cells(reps)
    per_n = (gn * Cg)[rc]
    n_r = n0[rc] + k // per_n
    ch_r = g0[rc] * Cg + k % per_n  # consecutive channels: the cell's groups are consecutive
    x_starts = ((n_r * C + ch_r) * H + in_lo[rc]) * irow
    x_lens = in_n[rc] * irow
    seq.add(ipu.Copy(_gather(x, x_starts, x_lens), _dst_runs(in_buf, in_off, nn * in_blk), name=f"{name}/exchange in"))

    # the weights: one run per cell ([groups][out channels][in channels][kernel] of w)
    w_blk = gn * mn * Cg * K
    w_buf, w_off = _blocks_variable(graph, f"{name}/weights", w.dtype, tiles, w_blk)
    w_starts = (g0 * Mg + m0) * Cg * K
    seq.add(ipu.Copy(_gather(w, w_starts, w_blk), _dst_runs(w_buf, w_off, w_blk), name=f"{name}/exchange weights"))

    # work lists, one table per distinct sub-field
    cache: dict = {}
    tables, summaries = [], []
    for i in range(cells):
        key = (int(r0[i]), int(rn[i]))
        if key not in cache:
            out_lo = (key[0],) + (0,) * (p.nsp - 1)
            out_hi = (key[0] + key[1],) + tuple(p.out_sp[1:])
            win_lo = (int(in_lo[i]),) + (0,) * (p.nsp - 1)
            win = (int(in_n[i]),) + tuple(p.in_sp[1:])
            lists, ent = hmac_worklists(1, out_lo, out_hi, win_lo, win, p.kernel, p.strides, p.dilations, p.pads,
                                        p.in_sp)
            cache[key] = (pack_worklists(lists, ent), worker_summary(lists, ent, 1))
        tables.append(cache[key][0])
        summaries.append(cache[key][1])
    wl, wl_off, wl_size = _worklist_constant(graph, f"{name}/worklists", tiles, tables)
    ent = np.asarray([s[0] for s in summaries], np.int64).reshape(cells, 6)
    pos = np.asarray([s[1] for s in summaries], np.int64).reshape(cells, 6)

    # one ConvPartialHorizontalMac per cell, a row (region) per batch element
    local_n = n_of - n0[cell_of]
    cs = graph.add_compute_set(f"{name}/hmac", debug=y.debug)
    ip = {"conv_groups": gn[cell_of], "out_groups": mn[cell_of], "in_groups": np.full(cell_of.size, Cg),
          "kernel_size": np.full(cell_of.size, K), "in_block": (in_n * irow)[cell_of],
          "out_block": (rn * orow)[cell_of],
          "in_stride": np.full(cell_of.size, p.strides[-1]), "out_stride": np.ones(cell_of.size, np.int64)}
    for j in range(6):
        ip[f"entries{j}"] = ent[cell_of, j]
        ip[f"positions{j}"] = pos[cell_of, j]
    fields = {"in": (in_buf, in_off[cell_of] + local_n * in_blk[cell_of], in_blk[cell_of]),
              "weights": (w_buf, w_off[cell_of], w_blk[cell_of]),
              "worklists": (wl, wl_off[cell_of], wl_size[cell_of]),
              "out": (part, out_start, out_size)}
    keep = out_size > 0
    if not keep.all():
        fields = {f: (v, s[keep], c[keep]) for f, (v, s, c) in fields.items()}
        ip = {k_: a[keep] for k_, a in ip.items()}
    # a cell's batch elements are the regions of one vertex (poplin folds the batch into the field)
    graph.add_vertices(cs, "ConvPartialHorizontalMac", vt[keep], fields, ip=ip, region=local_n[keep])
    seq.add(ipu.Execute(cs, name=f"{name}/hmac"))
    if part is not y:
        cast = graph.add_compute_set(f"{name}/cast", debug=y.debug)
        starts, stops, ptiles = y.pieces()
        graph.add_vertices(cast, "Cast", ptiles,
                           {"in": (part, starts, stops - starts), "out": (y, starts, stops - starts)})
        seq.add(ipu.Execute(cast, name=f"{name}/cast"))
    return seq


def _dst_runs(buf, off, sizes):
    """The view of a blocks variable that a gather writes: its blocks in order (all of it)."""
    return _view(buf, IndexRuns(off, sizes))


def build_weight_update(graph: ipu.Graph, x: ipu.Tensor, dy: ipu.Tensor, dw: ipu.Variable, p: ConvProblem,
                        plan: ConvPlan | None = None, name: str = "conv_weights_grad") -> ipu.Program:
    """dw (G*Mg, Cg, *kernel) = the gradient of the grouped convolution p's weights, from its input
    x and output gradient dy; dw is an unmapped variable, which this maps."""
    target = graph.target
    dtype = x.dtype
    if plan is None:
        plan = plan_weight_update(p, dtype, dw.dtype, target, reserved_bytes=_reserved_bytes(graph))
    seq = ipu.Sequence(name=name)
    G, Cg, Mg, N = p.G, p.Cg, p.Mg, p.N
    M, C = G * Mg, G * Cg
    K = p.kernel_size
    HO = p.out_rows
    orow, irow = p.out_row_len, p.in_row_len
    H = p.in_sp[0]
    (g0, n0, r0), (gn, nn, rn) = _grid(plan.parts, plan.chunks, (G, N, HO))
    cells = g0.size
    T = target.num_tiles
    tiles = np.arange(cells, dtype=np.int64) * T // cells
    P = plan.parts[1] * plan.parts[2]
    blk = gn * Mg * Cg * K  # the partial weight gradient of a cell
    if dw.numel == 0:
        return seq

    # the gradient's owners: each group chunk's block shared out among its P cells
    share = -(-blk // P)
    cp = np.arange(cells) % P
    s_lo = np.minimum(cp * share, blk)
    s_len = np.minimum(blk, s_lo + share) - s_lo
    dw_start = g0 * Mg * Cg * K + s_lo
    direct = P == 1 and dw.dtype == ipu.FLOAT32
    order = np.argsort(dw_start, kind="stable")
    dw.set_tile_runs(tiles[order], s_len[order])

    in_lo, in_n = _in_row_ranges(p, r0, rn)
    # input windows [group][channel][batch][rows][rest]
    in_sz = gn * Cg * nn * in_n * irow
    in_buf, in_off = _blocks_variable(graph, f"{name}/in_window", dtype, tiles, in_sz)
    reps = gn * Cg * nn
    rc, k = _runs_of_cells(reps)
    ch = g0[rc] * Cg + k // nn[rc]
    n_r = n0[rc] + k % nn[rc]
    seq.add(ipu.Copy(_gather(x, ((n_r * C + ch) * H + in_lo[rc]) * irow, in_n[rc] * irow),
                     _dst_runs(in_buf, in_off, in_sz), name=f"{name}/exchange in"))
    # output gradients [group][out channel][batch][rows][rest]
    g_sz = gn * Mg * nn * rn * orow
    g_buf, g_off = _blocks_variable(graph, f"{name}/grads", dy.dtype, tiles, g_sz)
    reps = gn * Mg * nn
    rc, k = _runs_of_cells(reps)
    och = g0[rc] * Mg + k // nn[rc]
    n_r = n0[rc] + k % nn[rc]
    seq.add(ipu.Copy(_gather(dy, ((n_r * M + och) * HO + r0[rc]) * orow, rn[rc] * orow),
                     _dst_runs(g_buf, g_off, g_sz), name=f"{name}/exchange grads"))

    cache: dict = {}
    tables, summaries = [], []
    for i in range(cells):
        key = (int(nn[i]), int(r0[i]), int(rn[i]))
        if key not in cache:
            out_lo = (key[1],) + (0,) * (p.nsp - 1)
            out_hi = (key[1] + key[2],) + tuple(p.out_sp[1:])
            win_lo = (int(in_lo[i]),) + (0,) * (p.nsp - 1)
            win = (int(in_n[i]),) + tuple(p.in_sp[1:])
            lists, ent = vmac_worklists(key[0], out_lo, out_hi, win_lo, win, p.kernel, p.strides, p.dilations,
                                        p.pads, p.in_sp)
            cache[key] = (pack_worklists(lists, ent), worker_summary(lists, ent, 3, singles=True))
        tables.append(cache[key][0])
        summaries.append(cache[key][1])
    wl, wl_off, wl_size = _worklist_constant(graph, f"{name}/worklists", tiles, tables)
    ent = np.asarray([s[0] for s in summaries], np.int64).reshape(cells, 6)
    pos = np.asarray([s[1] for s in summaries], np.int64).reshape(cells, 6)
    one = np.asarray([s[2] for s in summaries], np.int64).reshape(cells, 6)

    if direct:
        out_fields = (dw, dw_start, blk)
    else:
        partials, p_off = _blocks_variable(graph, f"{name}/partials", ipu.FLOAT32, tiles, blk)
        out_fields = (partials, p_off, blk)
    cs = graph.add_compute_set(f"{name}/vmac", debug=dw.debug)
    ip = {"conv_groups": gn, "out_chans": np.full(cells, Mg), "in_chans": np.full(cells, Cg),
          "kernel_size": np.full(cells, K), "in_block": nn * in_n * irow, "grad_block": nn * rn * orow,
          "in_stride": np.full(cells, p.strides[-1])}
    for j in range(6):
        ip[f"entries{j}"] = ent[:, j]
        ip[f"positions{j}"] = pos[:, j]
        ip[f"singles{j}"] = one[:, j]
    graph.add_vertices(cs, "ConvPartialVerticalMac", tiles,
                       {"in": (in_buf, in_off, in_sz),
                        "weights": (g_buf, g_off, g_sz), "worklists": (wl, wl_off, wl_size), "out": out_fields},
                       ip=ip)
    seq.add(ipu.Execute(cs, name=f"{name}/vmac"))
    if direct:
        return seq

    # each owner gathers the P partials of its share ([P][share]) and adds them
    red_sz = P * s_len
    red, red_off = _blocks_variable(graph, f"{name}/reduce_in", ipu.FLOAT32, tiles, red_sz)
    first = np.arange(cells) - cp  # the first cell of each group chunk
    src_starts = (p_off[first[:, None] + np.arange(P)[None, :]] + s_lo[:, None]).reshape(-1)
    src_lens = np.repeat(s_len, P)
    seq.add(ipu.Copy(_view(partials, IndexRuns(src_starts, src_lens)), _dst_runs(red, red_off, red_sz),
                     name=f"{name}/exchange partials"))
    cs = graph.add_compute_set(f"{name}/reduce", debug=dw.debug)
    keep = s_len > 0
    graph.add_vertices(cs, "MatMulReducePartials", tiles[keep],
                       {"partials": (red, red_off[keep], red_sz[keep]), "out": (dw, dw_start[keep], s_len[keep])},
                       ip={"num_partials": np.full(int(keep.sum()), P)})
    seq.add(ipu.Execute(cs, name=f"{name}/reduce"))
    return seq
