"""Tile-level building blocks shared by lowering rules: element-wise maps and reductions over
ipu tensors. Rules of single ops call them once; composite ops (softmax, norms, losses) chain them.
"""
from __future__ import annotations

import numpy as np

import ipu

from . import layouts, reduction_stages


def elementwise(ctx, codelet: str, inputs, field_names, shape, et, fp=None, ip=None, out=None,
                out_field="out", suffix="", layout_of: int = 0) -> ipu.Tensor:
    """out = codelet(inputs...) element by element, over `shape` (inputs broadcast to it).

    The output is laid out like the first whole-variable input of that shape (so that input needs
    no exchange); else, when an input is a permuted view of a whole variable (an activation stored
    in its producer's order), it clones that variable's layout and is returned through the same
    view (layouts.py); else it is laid out by the mapping policy. Other inputs are copied into the
    output's layout. An input broadcast along runs of the output (a scalar, one value per row as
    in softmax's x - max, one per channel) is not materialised when its field takes one element
    per vertex: the vertices are cut where its value changes and each gets its element (poplibs'
    BroadcastScalar / VectorInner vertices). `layout_of`: the input whose layout is cloned first.
    """
    shape = tuple(shape)
    if out is None:
        like = next((v for v in inputs if v.is_identity and v.shape == shape), None)
        if like is None:
            clone = layouts.clone_source(ctx, inputs, shape, layout_of)
            if clone is not None:
                return _cloned(ctx, codelet, inputs, field_names, shape, et, clone, fp, ip, out_field, suffix)
        out = ctx.new_var(shape, et, ctx.name(suffix or codelet), like=like)
    if out.numel:
        scalars = {}
        for name, v in zip(field_names, inputs):
            if (codelet, name) in SCALAR_BROADCAST_FIELDS and v.numel < out.numel:
                run = _trailing_run(v, shape)
                if run >= MIN_BROADCAST_RUN or v.numel == 1:
                    scalars[name] = _runs_of(v, shape, run, out.numel)
        _add_vertices(ctx, codelet, inputs, field_names, shape, out, out_field, scalars, fp, ip, suffix)
    return out


def _cloned(ctx, codelet, inputs, field_names, shape, et, clone, fp, ip, out_field, suffix) -> ipu.Tensor:
    """The element-wise map into a clone of `clone`'s variable (Poplar's graph.clone), over its
    storage; returned as the same view of the new variable."""
    view, order = clone
    var = view.variable
    out = ctx.g.add_variable(ctx.name(suffix or codelet), var.shape, et, ipu.TEMPORARY, debug=ctx.name())
    out.map_like(var)
    n = out.numel
    ins, scalars = [], {}
    for name, v in zip(field_names, inputs):
        if layouts.same_view(view, v):
            ins.append(v.variable)
            continue
        if v.numel < n:
            src = layouts.broadcast_sources(v, shape, order)
            if (codelet, name) in SCALAR_BROADCAST_FIELDS:
                cuts = np.flatnonzero(src[1:] != src[:-1]) + 1
                if v.numel == 1 or n >= MIN_CLONED_BROADCAST_RUN * (cuts.size + 1):
                    scalars[name] = (cuts, lambda starts, src=src: src[starts])
            ins.append(ipu.Tensor(v.variable, src, (n,)).reshape(var.shape))
        else:
            ins.append(layouts.in_order(v, order).reshape(var.shape))
    _add_vertices(ctx, codelet, ins, field_names, var.shape, out, out_field, scalars, fp, ip, suffix)
    return ipu.Tensor(out, view._index, shape)


def _runs_of(v, shape, run, numel):
    """(cut positions, sources at vertex starts) of an input broadcast along runs of `run` output
    elements."""
    src = np.zeros(1, np.int64) + v.flat_index()[0] if v.numel == 1 else \
        np.broadcast_to(v.index().reshape(_lead_shape(v, shape, _lead(shape, v, run))),
                        _lead(shape, v, run)).reshape(-1)
    cuts = np.arange(run, numel, run, dtype=np.int64) if run < numel else np.zeros(0, np.int64)
    return cuts, lambda starts: src[np.minimum(starts // run, src.size - 1)]


def _lead(shape, v, run):
    return tuple(shape)[: len(shape) - _trailing_axes(v, shape, run)]


def _add_vertices(ctx, codelet, inputs, field_names, shape, out, out_field, scalars, fp, ip, suffix):
    """One compute set of `codelet` vertices over out's pieces (worker regions for 2D vertices);
    `scalars`: field -> (cut positions, sources at given vertex starts) of the inputs handed to
    vertices one element each."""
    c = ipu.get_codelet(codelet)
    region = None
    vector = _vector_operand(codelet, inputs, field_names, out, scalars, ip)
    if vector is not None:
        _add_vector_outer(ctx, inputs, field_names, shape, out, out_field, scalars, ip, suffix)
        return
    if c.multi_region and not scalars:  # poplibs' 2D vertices: a tile's regions split between workers
        tiles, starts, counts, region = worker_regions(out, ctx.target.worker_contexts,
                                                       grain=max(1, 8 // out.dtype.itemsize))
    else:
        tiles, starts, counts = ctx.pieces(out, split_for_workers=not c.supervisor)
        if scalars:
            tiles, starts, counts = _cut(out, starts, counts, [cuts for cuts, _ in scalars.values()])
    fields = {}
    for name, v in zip(field_names, inputs):
        if name in scalars:
            fields[name] = _segment_scalars(ctx, v, scalars[name][1](starts), tiles)
        else:
            fields[name] = (ctx.like(v if v.shape == shape else v.broadcast(shape), out), starts, counts)
    fields[out_field] = (out, starts, counts)
    cs = ctx.compute_set(suffix or codelet)
    ctx.g.add_vertices(cs, codelet, tiles, fields, fp=fp, ip=ip, region=region)
    ctx.emit(ipu.Execute(cs, name=cs.name))


def _vector_operand(codelet, inputs, field_names, out, scalars, ip):
    """The field of a BinaryOp whose second operand is broadcast along runs of the output (a
    per-channel vector: batch norm's scale and shift) and that popops' BroadcastVectorOuter
    vertices can take (add, sub, mul of float32 / float16): "b", else None."""
    from codelets.broadcast import BROADCAST_VECTOR_OPS

    if codelet != "BinaryOp" or set(scalars) != {"b"} or not isinstance(ip, dict):
        return None
    if int(np.asarray(ip["op"]).reshape(-1)[0]) not in BROADCAST_VECTOR_OPS.values():
        return None
    if not out.dtype.is_float or out.dtype.is_float8 or any(v.dtype != out.dtype for v in inputs):
        return None
    return "b"


def _add_vector_outer(ctx, inputs, field_names, shape, out, out_field, scalars, ip, suffix):
    """out = a (op) b with b broadcast along runs of out (`scalars["b"]`: cut positions, sources at
    given starts), as popops lowers it (ElementWise.cpp binaryOpBroadcastOuterVector): each of a
    tile's contiguous regions is cut where the run length changes, and each part of two or more
    runs of one length is one BroadcastVectorOuter vertex (rows = runs, columns = run length, B
    = the runs' elements of b, copied next to it); a part of one run stays a BinaryOp vertex with
    its element (popops' BroadcastScalar). So a tile's vertices follow its regions, not the
    channels (or rows) it holds."""
    from codelets.broadcast import MAX_ROWS_COLUMNS, by_column

    cuts, source_at = scalars["b"]
    p_tiles, p_starts, p_counts = ctx.pieces(out)
    order = np.argsort(p_starts, kind="stable")
    p_tiles, p_starts, p_counts = p_tiles[order], p_starts[order], p_counts[order]
    long_runs = _long_run_cuts(out, p_starts, p_counts, cuts, MAX_ROWS_COLUMNS)
    tiles, starts, counts = _cut(out, p_starts, p_counts, [cuts, long_runs])
    n = starts.size
    piece_of = np.searchsorted(p_starts, starts, side="right") - 1
    new = np.ones(n, bool)
    new[1:] = (piece_of[1:] != piece_of[:-1]) | (counts[1:] != counts[:-1])
    first = np.flatnonzero(new)
    seg = np.cumsum(new) - 1
    pos = np.arange(n) - first[seg]
    new |= pos % MAX_ROWS_COLUMNS == 0  # rows is a short field
    first = np.flatnonzero(new)
    rows = np.diff(np.append(first, n))
    a_index = field_names.index("a")
    a = inputs[a_index]
    data = ctx.like(a if a.shape == shape else a.broadcast(shape), out)
    b = inputs[field_names.index("b")]
    cs = ctx.compute_set(suffix or "BinaryOp")
    single = rows == 1
    if single.any():  # one run: a BinaryOp vertex with its element
        f = first[single]
        fields = {"a": (data, starts[f], counts[f]), out_field: (out, starts[f], counts[f]),
                  "b": _segment_scalars(ctx, b, source_at(starts[f]), tiles[f])}
        ctx.g.add_vertices(cs, "BinaryOp", tiles[f], fields, ip={"op": np.full(f.size, ip["op"])})
    multi = ~single
    if multi.any():
        f, k = first[multi], rows[multi]
        run = np.repeat(f, k) + (np.arange(int(k.sum())) - np.repeat(np.cumsum(k) - k, k))  # runs, in order
        vtiles = tiles[f]
        vec = ctx.g.add_variable(ctx.name("broadcast"), (run.size,), b.dtype, ipu.TEMPORARY, debug=ctx.name())
        vec.tile_of[:] = np.repeat(vtiles, k)
        ctx.copy(ipu.Tensor(b.variable, source_at(starts[run]), (run.size,)), vec, "broadcast_vector")
        cols = counts[f]
        vw = max(1, 8 // out.dtype.itemsize)
        fields = {"data": (data, starts[f], cols * k), "B": (vec, np.cumsum(k) - k, k),
                  "out": (out, starts[f], cols * k)}
        params = {"op": np.full(f.size, ip["op"]), "by_column": by_column(cols, out.dtype).astype(np.int64),
                  "misaligned": ((cols % vw != 0) | (starts[f] % vw != 0)).astype(np.int64), "columns": cols,
                  "rows": k}
        ctx.g.add_vertices(cs, "BroadcastVectorOuter", vtiles, fields, ip=params)
    ctx.emit(ipu.Execute(cs, name=cs.name))


def _long_run_cuts(out, starts, counts, cuts, most: int) -> np.ndarray:
    """Further cuts that keep every run of the output's pieces (cut at `cuts`) to at most `most`
    elements (a vertex's columns field)."""
    bounds = np.unique(np.concatenate([starts, starts + counts, cuts]))
    lengths = np.diff(bounds)
    long = np.flatnonzero(lengths > most)
    if long.size == 0:
        return np.zeros(0, np.int64)
    extra = [np.arange(bounds[i] + most, bounds[i + 1], most, dtype=np.int64) for i in long]
    return np.concatenate(extra)


def worker_regions(var: ipu.Variable, workers: int, grain: int = 1):
    """(tiles, starts, counts, region) of multi-region worker vertices over `var`'s pieces: each
    tile's pieces, in order, dealt to at most `workers` vertices of about equal size, a piece cut
    where a vertex is full; `region` numbers each vertex's regions from 0.

    Source: poplibs poputil::splitRegionsBetweenWorkers (as popops' lowering of Clamp and its other
    2D vertices calls it): a vertex takes ceil(grains / workers) grains of `grain` elements (the
    vector width, 8 bytes), and at least 2 grains (its minElementsPerPartition)."""
    starts, stops, tiles = var.pieces()
    starts, counts, tiles = starts.astype(np.int64), (stops - starts).astype(np.int64), tiles.astype(np.int64)
    if starts.size == 0:
        z = np.zeros(0, np.int64)
        return z, z, z, z
    order = np.argsort(tiles, kind="stable")
    starts, counts, tiles = starts[order], counts[order], tiles[order]
    first = np.concatenate(([True], tiles[1:] != tiles[:-1]))
    tile_start = np.flatnonzero(first)
    total = np.add.reduceat(counts, tile_start)
    grains = -(-total // grain)
    per = np.maximum(-(-grains // workers), 2) * grain  # elements a vertex takes, per tile
    # element offset of each piece within its tile's sequence; cut at multiples of `per`
    seq_start = np.cumsum(counts) - counts
    base = np.repeat(seq_start[tile_start], np.diff(np.append(tile_start, len(starts))))
    per_p = np.repeat(per, np.diff(np.append(tile_start, len(starts))))
    lo = seq_start - base
    hi = lo + counts
    first_cut = (lo // per_p + 1) * per_p  # the first vertex boundary after each piece's start
    ncut = np.where(hi > first_cut, (hi - 1 - first_cut) // per_p + 1, 0)
    parts = ncut + 1
    idx = np.repeat(np.arange(len(starts)), parts)
    k = np.arange(idx.size) - np.repeat(np.cumsum(parts) - parts, parts)  # part number in its piece
    p_lo = np.where(k == 0, lo[idx], first_cut[idx] + (k - 1) * per_p[idx])
    p_hi = np.minimum(first_cut[idx] + k * per_p[idx], hi[idx])
    vertex = p_lo // per_p[idx]
    t = tiles[idx]
    new_vertex = (k > 0) | np.concatenate(([True], (t[1:] != t[:-1]) | (vertex[1:] != vertex[:-1])))
    # number regions from 0 within each vertex
    pos = np.arange(idx.size)
    region = pos - np.maximum.accumulate(np.where(new_vertex, pos, 0))
    return t, starts[idx] + (p_lo - lo[idx]), p_hi - p_lo, region


# vertex fields that take a single element and apply it to every output element
SCALAR_BROADCAST_FIELDS = {("BinaryOp", "a"), ("BinaryOp", "b"), ("Pow2ScaleThenCast", "log2_scale"),
                           ("CastThenPow2Scale", "log2_scale")}
# a broadcast input is handed to vertices one element each when its value holds for at least
# this many consecutive output elements (below it, the per-vertex overhead costs more than
# copying it into the output's layout)
MIN_BROADCAST_RUN = 32
# the same over a cloned layout (layouts.py), on average: there a materialised broadcast is itself
# a copy with a message per run of the storage, so a vertex per run costs less down to short runs
MIN_CLONED_BROADCAST_RUN = 32


def _trailing_run(v: ipu.Tensor, shape) -> int:
    """How many consecutive output elements share one element of `v` broadcast to `shape`: the
    product of the trailing output axes along which v has size 1 (1 when it varies along the last
    axis). A scalar covers the whole output."""
    if v.numel == 1:
        return int(np.prod(shape, dtype=np.int64))
    vshape = (1,) * (len(shape) - v.rank) + tuple(v.shape)
    run = 1
    for dv, do in zip(reversed(vshape), reversed(shape)):
        if dv != 1 or do == 1:
            if dv != 1:
                break
            continue
        run *= do
    return run


def _cut(out, starts, counts, cut_lists):
    """The vertices' pieces cut at every position of each list (piece starts kept)."""
    ends = starts + counts
    b = np.unique(np.concatenate([starts, *cut_lists]))
    # keep only cuts inside a piece (pieces can leave gaps when split for workers)
    piece = np.searchsorted(starts, b, side="right") - 1
    inside = (piece >= 0) & (b < ends[np.clip(piece, 0, None)])
    b = b[inside]
    piece = piece[inside]
    nxt = np.append(b[1:], np.iinfo(np.int64).max)
    new_counts = np.minimum(nxt, ends[piece]) - b
    return out.tiles_at(b).astype(np.int64), b, new_counts


def _segment_scalars(ctx, v, per_vertex, tiles):
    """One element of the broadcast input per vertex (`per_vertex`: its flat element of v's
    variable), on the vertex's tile: the field triple."""
    sc = ctx.g.add_variable(ctx.name("broadcast"), (tiles.size,), v.dtype, ipu.TEMPORARY, debug=ctx.name())
    sc.tile_of[:] = tiles
    ctx.copy(ipu.Tensor(v.variable, per_vertex, (tiles.size,)), sc, "broadcast_scalar")
    return sc, np.arange(tiles.size, dtype=np.int64), np.ones(tiles.size, np.int64)


def _trailing_axes(v, shape, run) -> int:
    """How many trailing output axes make up `run`."""
    if v.numel == 1:
        return len(shape)
    n, acc = 0, 1
    for d in reversed(shape):
        if acc == run:
            break
        acc *= d
        n += 1
    return n


def _lead_shape(v, shape, lead):
    """v's index array reshaped to broadcast against the leading (non-run) output axes."""
    vshape = (1,) * (len(shape) - v.rank) + tuple(v.shape)
    return vshape[: len(lead)]


def unary(ctx, name: str, x: ipu.Tensor, et=None, suffix="") -> ipu.Tensor:
    from codelets.elementwise import UNARY_OPS

    return elementwise(ctx, "UnaryOp", [x], ["in"], x.shape, et or x.dtype, ip={"op": UNARY_OPS[name]},
                       suffix=suffix or name)


_BOOL_RESULT = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
                "logical_or"}


def binary(ctx, name: str, a: ipu.Tensor, b: ipu.Tensor, shape=None, et=None, suffix="") -> ipu.Tensor:
    from codelets.elementwise import BINARY_OPS

    if shape is None:
        shape = np.broadcast_shapes(a.shape, b.shape)
    if et is None:
        et = ipu.BOOL if name in _BOOL_RESULT else a.dtype
    return elementwise(ctx, "BinaryOp", [a, b], ["a", "b"], shape, et, ip={"op": BINARY_OPS[name]},
                       suffix=suffix or name)


def scalar_constant(ctx, value, et: ipu.ElementType, name="scalar") -> ipu.Variable:
    if et.is_float8:  # the encoded byte (unscaled)
        from codelets.float8 import host_encode
        data = host_encode(np.array(value, np.float64), et.name).view(et.numpy)
    else:
        data = np.array(value, dtype=et.numpy)
    c = ctx.g.add_constant(ctx.name(name), data, et)
    ctx.tiles.map(ctx.g, c)
    return c


# -- reductions ---------------------------------------------------------------------------------

# how partial results of each reduction combine in the second stage
_SECOND_STAGE = {"sum": "sum", "max": "max", "min": "min", "prod": "prod", "sum_squares": "sum",
                 "abs_sum": "sum"}


def reduce(ctx, x: ipu.Tensor, axes, op: str, et=None, keepdims=False, suffix="reduce") -> ipu.Tensor:
    """Reduce `x` over `axes` with op in sum / max / min / prod / sum_squares / abs_sum.

    Stage 1 reduces, on every tile, the elements of each output row that the tile holds (after an
    on-tile rearrangement that makes each (tile, row) group contiguous: no exchange); the partials
    are then combined across tiles in stages as popops combines them (reduction_stages), the last
    on the tile of each output element. Partials of float16 data are float32, as poplibs
    accumulates.
    """
    from codelets.reduce import REDUCE_OPS

    et = et or x.dtype
    if x.dtype.numpy.kind in "iu" and x.dtype != ipu.INT32:
        # the Reduce vertex works on int32: widen, reduce (sums and products wrap the same way in
        # the low bits), narrow back
        if x.dtype == ipu.UINT32 and op in ("max", "min"):
            raise NotImplementedError(f"{ctx.name()}: max/min reductions of uint32 are not supported; cast to "
                                      f"int32 or float32 first")
        wide = elementwise(ctx, "Cast", [x], ["in"], x.shape, ipu.INT32, suffix=f"{suffix}/widen")
        r = reduce(ctx, wide, axes, op, ipu.INT32, keepdims, suffix)
        return elementwise(ctx, "Cast", [r], ["in"], r.shape, et, suffix=f"{suffix}/narrow")
    axes = tuple(sorted(a % x.rank for a in axes)) if x.rank else ()
    kept = [d for d in range(x.rank) if d not in axes]
    out_shape = tuple(x.shape[d] for d in kept)
    full_shape = tuple(1 if d in axes else x.shape[d] for d in range(x.rank))
    rows = int(np.prod(out_shape, dtype=np.int64))
    k = int(np.prod([x.shape[d] for d in axes], dtype=np.int64))
    out = ctx.new_var(full_shape if keepdims else out_shape, et, ctx.name(suffix))
    if rows == 0:
        return out
    if k == 0:
        raise ValueError(f"{ctx.name()}: reducing over an empty axis has no value")
    perm = kept + list(axes)
    xp = x.transpose(perm).reshape(rows, k) if x.rank else x.reshape(1, 1)
    src_index = xp.flat_index()
    src_tiles = x.variable.tile_of[src_index]
    row_of = np.repeat(np.arange(rows, dtype=np.int64), k)
    # stage 1: groups of (tile, row), each made contiguous on its tile
    order = np.lexsort((row_of, src_tiles))
    g_tile = src_tiles[order]
    g_row = row_of[order]
    brk = np.ones(order.size, bool)
    brk[1:] = (g_tile[1:] != g_tile[:-1]) | (g_row[1:] != g_row[:-1])
    g_start = np.flatnonzero(brk)
    g_count = np.diff(np.append(g_start, order.size))
    grp_tile = g_tile[g_start].astype(np.int64)
    grp_row = g_row[g_start]
    single_stage = np.bincount(grp_row, minlength=rows).max() == 1
    if not single_stage and order.size < MIN_GROUP * g_start.size:
        # the (tile, row) groups are tiny (e.g. a column sum of a row-major tensor): partial sums
        # would cost a vertex and an exchanged partial per element, so send the elements themselves
        return _reduce_rows_on_output_tiles(ctx, x, src_index, rows, k, out, REDUCE_OPS[op], suffix)
    grouped = src_index[order]
    s_starts = g_start
    if x.is_identity and np.array_equal(grouped, np.arange(order.size)):
        staged = x.variable  # each group already is a run of consecutive elements on its tile
    elif _groups_in_place(x.variable, grouped, g_start, g_count):
        # each group a run of one piece of the variable (an activation stored in its producer's
        # cells: layouts.py): reduced where it lies, no grouping copy
        staged, s_starts = x.variable, grouped[g_start]
    else:
        staged = ctx.g.add_variable(ctx.name(f"{suffix}/grouped"), (order.size,), x.dtype, ipu.TEMPORARY,
                                    debug=ctx.name())
        staged.tile_of[:] = g_tile
        ctx.copy(ipu.Tensor(x.variable, grouped, (order.size,)), staged, f"{suffix}/group")
    part_et = ipu.FLOAT32 if (et == ipu.FLOAT16 or x.dtype == ipu.FLOAT16) and not single_stage else et
    if single_stage:
        # every row lives on one tile: stage 1 writes the output directly where the row is
        out.tile_of[:] = grp_tile[np.argsort(grp_row)]
        _reduce_vertices(ctx, f"{suffix}", grp_tile, staged, s_starts, g_count, out, grp_row,
                         REDUCE_OPS[op])
        return out
    partials = ctx.g.add_variable(ctx.name(f"{suffix}/partials"), (grp_row.size,), part_et, ipu.TEMPORARY,
                                  debug=ctx.name())
    partials.tile_of[:] = grp_tile
    _reduce_vertices(ctx, f"{suffix}/partial", grp_tile, staged, s_starts, g_count, partials,
                     np.arange(grp_row.size), REDUCE_OPS[op])
    # the partials combined across tiles in stages, as popops does (reduction_stages)
    staged_partials = reduction_stages.Partials(partials, grp_tile, grp_row, np.arange(grp_row.size))
    stage = 0
    while reduction_stages.another_stage(ctx.target, staged_partials, rows):
        staged_partials = reduction_stages.intermediate(ctx, staged_partials, rows, _SECOND_STAGE[op],
                                                        f"{suffix}/stage{stage}")
        stage += 1
    # outputs spread so that every tile receives at least MIN_BYTES_PER_TILE of partials
    _spread_outputs(ctx, out, staged_partials.row.size / rows * part_et.itemsize)
    reduction_stages.final(ctx, staged_partials, rows, out, _SECOND_STAGE[op], f"{suffix}/final")
    return out


# below this many elements per (tile, row) group on average, reductions skip the on-tile stage
MIN_GROUP = 4


def _groups_in_place(var: ipu.Variable, grouped: np.ndarray, g_start, g_count) -> bool:
    """Whether every group grouped[g_start[i]:][:g_count[i]] (flat elements of var) is a run of
    consecutive elements inside one piece of var (so a vertex can read it where it lies)."""
    if grouped.size == 0 or grouped.size != var.numel:
        return False
    step = np.diff(grouped)
    step[g_start[1:] - 1] = 1  # a group may start anywhere
    if (step != 1).any():
        return False
    starts = var.pieces()[0]
    first = grouped[g_start]
    return bool(np.array_equal(np.searchsorted(starts, first, side="right"),
                               np.searchsorted(starts, first + g_count - 1, side="right")))


def _spread_outputs(ctx, out, bytes_in_per_output: float) -> None:
    """Map a reduction's outputs linearly so that each tile used receives at least
    MIN_BYTES_PER_TILE of the data reduced into them (not of the outputs themselves)."""
    from .mapping import MIN_BYTES_PER_TILE

    per_tile = max(1, int(np.ceil(MIN_BYTES_PER_TILE / max(bytes_in_per_output, 1e-9))))
    T = ctx.target.num_tiles
    chunk = max(-(-out.numel // T), per_tile)
    used = -(-out.numel // chunk) if out.numel else 0
    # outputs that need fewer than all the tiles start where the last ones ended (the allocator's
    # rotation): otherwise every reduction of a model gathers its partials on the first tiles
    tiles = (ctx.tiles.take_small_tiles(used) + np.arange(T)) % T if 0 < used < T else None
    ctx.g.map_linearly(out, min_elements_per_tile=per_tile, tiles=tiles)


def _reduce_rows_on_output_tiles(ctx, x, src_index, rows, k, out, op_code, suffix):
    """One stage: the k elements of every output row are exchanged to that output's tile (rows
    laid out [rows, k]) and one Reduce vertex per run of rows on a tile reduces them (ROWS
    layout, k elements per output)."""
    _spread_outputs(ctx, out, k * x.dtype.itemsize)
    gathered = ctx.g.add_variable(ctx.name(f"{suffix}/rows"), (rows * k,), x.dtype, ipu.TEMPORARY,
                                  debug=ctx.name())
    gathered.tile_of[:] = np.repeat(out.tile_of, k)
    ctx.copy(ipu.Tensor(x.variable, src_index, (rows * k,)), gathered, f"{suffix}/gather")
    tiles, starts, counts = ctx.pieces(out, split_for_workers=True)  # a vertex per worker
    cs = ctx.compute_set(suffix)
    ctx.g.add_vertices(cs, "Reduce", tiles,
                       {"in": (gathered, starts * k, counts * k), "out": (out, starts, counts)},
                       ip={"op": op_code, "inner": k, "layout": 0})
    ctx.emit(ipu.Execute(cs, name=cs.name))
    return out


def _reduce_vertices(ctx, name, tiles, src, starts, counts, dst, dst_index, op_code):
    """Reduce groups src[start:start+count] -> dst[dst_index], in Reduce vertices of several groups
    where they can share one (`continuous_groups`)."""
    cs = ctx.compute_set(name)
    dst_var = dst.variable if isinstance(dst, ipu.Tensor) and not isinstance(dst, ipu.Variable) else dst
    first, n_out = continuous_groups(tiles, src, starts, counts, dst_var, dst_index, ctx.target.worker_contexts)
    k = counts[first]
    ctx.g.add_vertices(cs, "Reduce", tiles[first],
                       {"in": (src, starts[first], n_out * k), "out": (dst_var, dst_index[first], n_out)},
                       ip={"op": op_code, "inner": k, "layout": 0})
    ctx.emit(ipu.Execute(cs, name=cs.name))


def continuous_groups(tiles, src: ipu.Variable, starts, counts, dst: ipu.Variable, dst_index, workers: int):
    """(first group, groups) of each Reduce vertex over groups src[start:start+count] -> dst[dst_index]
    (given in order): consecutive groups of one size that follow each other in one piece of src
    and write consecutive elements of one piece of dst share a vertex, as poplibs' continuous
    reduction does (popops ContinuousReduce, ALL_REGIONS_CONTINUOUS: the input [outputs, k] and
    the outputs each one region, so its state does not grow with the outputs). A tile's groups
    are dealt to at most `workers` vertices of about equal outputs each, plus one per break of a
    run (poplibs splits a tile's reductions between its worker contexts)."""
    tiles = np.asarray(tiles, np.int64)
    starts = np.asarray(starts, np.int64)
    counts = np.asarray(counts, np.int64)
    dst_index = np.asarray(dst_index, np.int64)
    n = tiles.size
    if n == 0:
        z = np.zeros(0, np.int64)
        return z, z
    s_starts = src.pieces()[0]
    d_starts = dst.pieces()[0]
    s_piece = np.searchsorted(s_starts, starts, side="right")
    d_piece = np.searchsorted(d_starts, dst_index, side="right")
    join = np.zeros(n, bool)
    join[1:] = ((tiles[1:] == tiles[:-1]) & (counts[1:] == counts[:-1]) & (starts[1:] == starts[:-1] + counts[:-1])
                & (s_piece[1:] == s_piece[:-1]) & (dst_index[1:] == dst_index[:-1] + 1)
                & (d_piece[1:] == d_piece[:-1]))
    # a tile's groups over its workers: at most ceil(groups on the tile / workers) a vertex
    per_tile = np.bincount(tiles, minlength=int(tiles.max()) + 1)
    per = np.maximum(-(-per_tile[tiles] // workers), 1)
    run_start = np.flatnonzero(~join)
    run_of = np.cumsum(~join) - 1
    pos = np.arange(n) - run_start[run_of]
    first = np.flatnonzero(~join | (pos % per == 0))
    n_out = np.diff(np.append(first, n))
    return first, n_out
