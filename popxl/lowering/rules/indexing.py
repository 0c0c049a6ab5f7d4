"""Indexing by run-time values: gather, tied_gather, grouped_gather, scatter, scatter_reduce,
grouped_scatter_reduce, dynamic_slice, dynamic_update(_) and onehot.

The IPU's exchange is fixed at compile time, so these ops follow popops::multiSlice /
multiUpdate: the indexed tensor is viewed as a table (the indexed axis as rows, every other axis
flattened into columns) and laid out by columns (`columns.ColumnPlan`): each tile holds all
the rows of some columns. The index tensor is small; it is broadcast to those tiles, and one
vertex per block looks up (MultiSlice, DynamicSlice) or updates (MultiUpdate, DynamicUpdate) its
own columns. Outputs stay in the block layout and are bound as views.

Out-of-range indices (PopXL): gather / grouped_gather give zeros for them (PopXL leaves them
undefined unless zero_OOR=True, which asks for zeros); constant indices known at build time to
be out of range are an error unless zero_OOR. scatter / scatter_reduce skip them (popops
multiUpdate). dynamic_slice / dynamic_update read an offset >= the axis size as 0 and wrap the
slice around the end of the axis (popops dynamicSlice).
"""
from __future__ import annotations

import numpy as np

import ipu

from .. import blocks
from ..columns import ColumnPlan, split
from ..mapping import MIN_BYTES_PER_TILE
from ..registry import lowering_rule


def _prod(shape) -> int:
    return int(np.prod(shape, dtype=np.int64)) if len(shape) else 1


def _is_inplace(op) -> bool:
    return bool(op.aliases) and 0 in op.aliases.values()


def _constant_data(t):
    """The host data of a popxl Constant (None for other tensors)."""
    from popxl.tensor import Constant

    return np.asarray(t._data) if isinstance(t, Constant) else None


def _check_static(ctx, op, t_indices, size: int, what: str):
    data = _constant_data(t_indices)
    if data is None or data.size == 0:
        return
    bad = data[(data < 0) | (data >= size)]
    if bad.size:
        raise ValueError(
            f"{op.type} {op.name!r}: the constant indices {sorted(set(bad.tolist()))[:8]} are out of range "
            f"for {what} of size {size}. PopXL leaves such lookups undefined; pass zero_OOR=True to get "
            f"zeros for them, or use indices in [0, {size})."
        )


def _empty_output(ctx, op, i=0):
    return ctx.new_output(op, i)


def _workers(ctx, plan, b) -> int:
    """How many vertices block b's work may be split into so its tile's workers are all busy."""
    return max(1, ctx.target.worker_contexts // int(plan.blocks_on_tile[b]))


# -- gather -----------------------------------------------------------------------------------


# A tile keeps at most this share of its memory for one column block of a looked-up table; a
# taller table is split into row groups too (popops' lookup split), each group on its own tiles,
# and their partial results (zeros where an index is not in the group) are summed.
TABLE_SHARE_OF_TILE = 0.25


def _row_groups(ctx, G, N, D, isz) -> int:
    """How many row groups a (G, N, D) table needs so that one tile's block fits the budget."""
    T = ctx.target.num_tiles
    budget = max(1, int(ctx.target.bytes_per_tile * TABLE_SHARE_OF_TILE))
    R = 1
    while R < N and -(-N // R) * -(-G * D * R // T) * isz > budget and G * D * (R + 1) <= T:
        R += 1
    return R


def _slice_vertices(ctx, plan, base, rows, row_base, offs, M, out, out_base, tiles, fields, ip):
    b_starts, o_starts = plan.starts(rows), plan.starts(M)
    for b in range(plan.num_blocks):
        w = int(plan.width[b])
        ms, mc = split(M, _workers(ctx, plan, b))
        for s, c in zip(ms, mc):
            tiles.append(plan.tile[b])
            fields["base"].append(b_starts[b])
            fields["offsets"].append(plan.pair[b] * M + s)
            fields["out"].append(out_base + o_starts[b] + s * w)
            fields["m"].append(c)
            ip["region"].append(w)
            ip["rows"].append(rows)
            ip["row_base"].append(row_base)


def _index_split(ctx, G, N, D, M, isz) -> int:
    """Into how many chunks of lookups a gather is split (popops' lookup split): a table with few
    columns lands on few tiles, and its output (M rows of those columns) with it. Each chunk gets
    its own copy of the table on other tiles, so the output spreads as a linear mapping would
    spread it (at least MIN_BYTES_PER_TILE per tile); the copies of the table move fewer bytes
    than the split spreads. The chunk count divides M (equal chunks, no padding)."""
    T = ctx.target.num_tiles
    _, plan_tiles = ColumnPlan.columns_per_tile(T, G, D, N, isz)
    out_bytes, table_bytes = G * M * D * isz, G * N * D * isz
    if not plan_tiles or M < 2 or not out_bytes:
        return 1
    target = min(T // plan_tiles, out_bytes // (plan_tiles * MIN_BYTES_PER_TILE), 1 + out_bytes // table_bytes, M)
    for s in range(int(target), 1, -1):
        if M % s == 0:
            return s
    return 1


def multi_slice(ctx, table: ipu.Tensor, offsets: ipu.Tensor, suffix="gather") -> ipu.Tensor:
    """out[g, m, :] = table[g, offsets[g, m], :] (zeros where the offset is out of range), as a
    (G, M, D) view."""
    G, N, D = table.shape
    M = offsets.shape[1]
    isz = table.dtype.itemsize
    R = _row_groups(ctx, G, N, D, isz) if G == 1 else 1
    if R > 1 and table.dtype not in (ipu.FLOAT32, ipu.FLOAT16, ipu.INT32):
        R = 1  # the partial sums need a Reduce type; a tall table of another type stays whole
    S = _index_split(ctx, G, N, D, M, isz) if R == 1 else 1
    if S > 1:  # chunk s of group g's lookups becomes group g * S + s, with its own copy of the table
        reps = table.reshape(G, 1, N, D).broadcast((G, S, N, D)).reshape(G * S, N, D)
        out = multi_slice(ctx, reps, offsets.reshape(G * S, M // S), suffix)
        return out.reshape(G, M, D)
    bounds = np.linspace(0, N, R + 1).astype(np.int64)
    plans = [ColumnPlan(ctx, G, D, int(b - a), isz) for a, b in zip(bounds[:-1], bounds[1:])]
    # the output: one (G, M, D) block layout per row group, in one variable
    out = ctx.g.add_variable(ctx.name(f"{suffix}/out"), (R * G * M * D,), table.dtype, ipu.TEMPORARY,
                             debug=ctx.name())
    views = []
    # per vertex, filled by _slice_vertices: its tile, its field offsets, its parameters
    tiles: list[int] = []
    fields: dict[str, list[int]] = {"base": [], "offsets": [], "out": [], "m": []}
    ip: dict[str, list[int]] = {"region": [], "rows": [], "row_base": []}
    cs = ctx.compute_set(suffix)
    bases = []
    for r, plan in enumerate(plans):
        a, b = int(bounds[r]), int(bounds[r + 1])
        part = table[:, a:b, :] if R > 1 else table
        base, _ = plan.place(part, f"{suffix}/table" + (f"{r}" if R > 1 else ""))
        offs = plan.broadcast(offsets, f"{suffix}/offsets" + (f"{r}" if R > 1 else ""))
        n0 = r * G * M * D
        if G * M * D:
            out.tile_of[n0:n0 + G * M * D] = np.repeat(plan.tile, plan.width * M).astype(np.int32)
        views.append(n0 + plan.positions(M))
        t0 = len(tiles)
        _slice_vertices(ctx, plan, base, b - a, a, offs, M, out, n0, tiles, fields, ip)
        bases.append((base, offs, len(tiles) - t0))
    k = 0
    for base, offs, n in bases:  # one add_vertices per (table, offsets) pair of variables
        sl = slice(k, k + n)
        region = np.asarray(ip["region"][sl], np.int64)
        m = np.asarray(fields["m"][sl], np.int64)
        rows = np.asarray(ip["rows"][sl], np.int64)
        ctx.g.add_vertices(cs, "MultiSlice", np.asarray(tiles[sl], np.int64),
                           {"base": (base, np.asarray(fields["base"][sl], np.int64), region * rows),
                            "offsets": (offs, np.asarray(fields["offsets"][sl], np.int64), m),
                            "out": (out, np.asarray(fields["out"][sl], np.int64), m * region)},
                           ip={"region": region, "rows": rows, "row_base": np.asarray(ip["row_base"][sl], np.int64)})
        k += n
    ctx.emit(ipu.Execute(cs, name=cs.name))
    if R == 1:
        return ipu.Tensor(out, views[0], views[0].shape)
    parts = np.stack(views)  # (R, G, M, D)
    summed = blocks.reduce(ctx, ipu.Tensor(out, parts, parts.shape), (0,), "sum", suffix=f"{suffix}/row_groups")
    return summed


def _gather(ctx, op, t, idx, axis, group: bool):
    t_out = op.outputs[0]
    N = t.shape[axis]
    if not op.attrs.get("zero_OOR"):
        _check_static(ctx, op, op.inputs[1], N, f"axis {axis}")
    if t_out.nelms == 0:
        return _empty_output(ctx, op)
    if N == 0:
        raise ValueError(f"{op.type} {op.name!r}: cannot gather from an empty axis {axis}")
    rank = t.rank
    g0 = 1 if group else 0
    pre = tuple(range(g0, axis))
    post = tuple(range(axis + 1, rank))
    G = t.shape[0] if group else 1
    table = t.transpose(((0,) if group else ()) + (axis,) + pre + post).reshape(G, N, -1)
    table.shape[2]
    M = idx.numel // G
    out = multi_slice(ctx, table, idx.reshape(G, M), op.type)  # (G, M, D)
    pre_shape = tuple(t.shape[d] for d in pre)
    post_shape = tuple(t.shape[d] for d in post)
    out = out.reshape((G, M) + pre_shape + post_shape)
    npre = len(pre_shape)
    perm = (0,) + tuple(range(2, 2 + npre)) + (1,) + tuple(range(2 + npre, 2 + npre + len(post_shape)))
    out = out.transpose(perm)
    ctx.bind(t_out, out.reshape(tuple(t_out.shape)))


@lowering_rule("gather", "tied_gather")
def gather(ctx, op):
    t, idx = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    _gather(ctx, op, t, idx, op.attrs["axis"], group=False)


@lowering_rule("grouped_gather")
def grouped_gather(ctx, op):
    t, idx = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    _gather(ctx, op, t, idx, op.attrs["axis"], group=True)


# -- scatter ----------------------------------------------------------------------------------


def _identity(reduction: str, et: ipu.ElementType) -> float:
    if reduction in ("sum", "none"):
        return 0.0
    if reduction == "mul":
        return 1.0
    if et.is_float:
        return -np.inf if reduction == "max" else np.inf
    info = np.iinfo(et.numpy) if et.numpy.kind in "iu" else None
    if info is None:
        return 0.0 if reduction == "max" else 1.0
    return float(info.min if reduction == "max" else info.max)


def multi_update(ctx, plan, base, rows, offsets, per_column: bool, updates, op_code: int,
                 init=None, track=False, suffix="scatter"):
    """One MultiUpdate vertex per block: base (blocks, `rows` rows) op= updates (blocks, K rows);
    offsets: the broadcast (pairs, K) variable, or a per-column (blocks, K rows) layout."""
    K = updates.numel // max(plan.groups * plan.cols, 1)
    b_starts, u_starts = plan.starts(rows), plan.starts(K)
    w = plan.width
    if per_column:
        o_start, o_count = u_starts, w * K
    else:
        o_start, o_count = plan.pair * K, np.full(plan.num_blocks, K, np.int64)
    cs = ctx.compute_set(suffix)
    ctx.g.add_vertices(cs, "MultiUpdate", plan.tile,
                       {"base": (base, b_starts, w * rows), "offsets": (offsets, o_start, o_count),
                        "updates": (updates, u_starts, w * K)},
                       fp={"init_value": 0.0 if init is None else init},
                       ip={"region": w, "rows": rows, "row_base": 0, "op": op_code,
                           "per_column": int(per_column), "init": int(init is not None), "track": int(track)})
    ctx.emit(ipu.Execute(cs, name=cs.name))


def _to_front(view: ipu.Tensor, axis: int) -> ipu.Tensor:
    """(1, size of axis, everything else) view with `axis` first."""
    perm = (axis,) + tuple(d for d in range(view.rank) if d != axis)
    return view.transpose(perm).reshape(1, view.shape[axis], -1)


def _from_front(view: ipu.Tensor, shape, axis: int) -> ipu.Tensor:
    """Inverse of _to_front for a tensor of `shape`."""
    others = tuple(shape[d] for d in range(len(shape)) if d != axis)
    v = view.reshape((shape[axis],) + others)
    inv = np.argsort((axis,) + tuple(d for d in range(len(shape)) if d != axis))
    return v.transpose(tuple(int(i) for i in inv))


@lowering_rule("scatter")
def scatter(ctx, op):
    """ONNX ScatterElements: out = t; out[..., indices[p], ...] = values[p] along axis. Indices
    may cover only part of t's other axes; positions they do not reach keep t's values."""
    t, idx, vals = (ctx.value(x) for x in op.inputs)
    axis = op.attrs["axis"]
    t_out = op.outputs[0]
    if t.numel == 0:
        return _empty_output(ctx, op)
    for d in range(t.rank):
        if d != axis and idx.shape[d] > t.shape[d]:
            raise ValueError(f"scatter {op.name!r}: indices {idx.shape} are larger than t {t.shape} along axis {d}")
    N = t.shape[axis]
    key = tuple(slice(None) if d == axis else slice(0, idx.shape[d]) for d in range(t.rank))
    covers_all = all(idx.shape[d] == t.shape[d] for d in range(t.rank) if d != axis)
    if covers_all:
        target = t
        out = None
    else:
        # positions the indices do not reach keep t's values: start from a copy of t
        out = ctx.new_var(t.shape, t.dtype, ctx.name("scatter/out"), like=t if t.is_identity else None)
        ctx.copy(t, out, "scatter/copy")
        target = out[key]
    table = _to_front(target, axis)
    D = table.shape[2]
    plan = ColumnPlan(ctx, 1, D, N, t.dtype.itemsize)
    base, base_view = plan.place(table, "scatter/table", fresh=out is None)  # t keeps its value
    if idx.numel:
        upd, _ = plan.place(_to_front(vals, axis), "scatter/values")
        offs, _ = plan.place(_to_front(idx, axis), "scatter/indices")
        multi_update(ctx, plan, base, N, offs, True, upd, 0, suffix="scatter")
    result = _from_front(base_view, target.shape, axis)
    if out is None:
        ctx.bind(t_out, result)
    else:
        ctx.copy(result, target, "scatter/back")
        ctx.bind(t_out, out)


@lowering_rule("scatter_reduce", "grouped_scatter_reduce")
def scatter_reduce(ctx, op):
    """out[..., indices[p], ...] reduce= data[p] along axis, starting from initial_values or the
    reduction's identity; with max/min and no initial values, positions no index reaches are 0
    (PopART). A grouped scatter_reduce is the same per group, which is what the group axis (a
    non-reduced axis) gives anyway."""
    from codelets.indexing import UPDATE_OPS

    names = op.attrs.get("input_names") or ("data", "indices")
    data = ctx.value(op.inputs[0])
    idx = ctx.value(op.inputs[1])
    init_t = ctx.value(op.inputs[names.index("initial_values")]) if "initial_values" in names else None
    reduction = op.attrs["reduction"]
    axis = op.attrs["axis"]
    t_out = op.outputs[0]
    et = ctx.etype(t_out)
    A = int(op.attrs["axis_size"])
    out_shape = tuple(t_out.shape)
    if t_out.nelms == 0:
        return _empty_output(ctx, op)
    D = _prod(out_shape) // A
    plan = ColumnPlan(ctx, 1, D, A, et.itemsize)
    if init_t is not None:
        base, base_view = plan.place(_to_front(init_t, axis), "scatter_reduce/initial", fresh=not _is_inplace(op))
        init, track = None, False
    else:
        base, base_view = plan.variable("scatter_reduce/out", A, et)
        init = _identity(reduction, et)
        track = reduction in ("max", "min")
    if data.numel:
        upd, _ = plan.place(_to_front(data, axis), "scatter_reduce/data")
        K = data.shape[axis]
        if idx.shape == data.shape:
            offs, _ = plan.place(_to_front(idx, axis), "scatter_reduce/indices")
            per_column = True
        else:  # one index per slice of the axis, shared by every column
            offs = plan.broadcast(idx.reshape(1, K), "scatter_reduce/indices")
            per_column = False
        multi_update(ctx, plan, base, A, offs, per_column, upd, UPDATE_OPS[reduction], init=init, track=track,
                     suffix=op.type)
    elif init is not None:
        # nothing to scatter: the identity everywhere (0 for max/min, PopART's masked fill)
        fill = 0.0 if track else init
        c = ctx.g.add_constant(ctx.name("scatter_reduce/empty"), np.full(out_shape, fill, et.numpy), et)
        ctx.tiles.map(ctx.g, c)
        ctx.bind(t_out, c)
        return
    ctx.bind(t_out, _from_front(base_view, out_shape, axis))


# -- dynamic slice / update -------------------------------------------------------------------


def _dynamic_one(ctx, kind, table, offset, size, update=None, suffix="dynamic", inplace=False):
    """DynamicSlice (update None) or DynamicUpdate of a (1, N, D) table along its rows at the
    run-time `offset` (a one-element view). Returns the (1, size, D) slice or the updated
    (1, N, D) table, as views of block layouts. An update writes into `table`'s own storage only
    when `inplace` (and the storage already has the block layout)."""
    _, N, D = table.shape
    plan = ColumnPlan(ctx, 1, D, N, table.dtype.itemsize)
    base, base_view = plan.place(table, f"{suffix}/table", fresh=kind == "update" and not inplace)
    offs = plan.broadcast(offset.reshape(1, 1), f"{suffix}/offset")
    if kind == "slice":
        other, other_view = plan.variable(f"{suffix}/out", size, table.dtype)
    else:
        other, other_view = plan.place(update, f"{suffix}/update")
    b_starts, s_starts = plan.starts(N), plan.starts(size)
    l_tiles, l_fb, l_fo, l_fs, l_ns, l_region, l_first = [], [], [], [], [], [], []  # per vertex
    for b in range(plan.num_blocks):
        w = int(plan.width[b])
        # DynamicSlice / DynamicUpdate are supervisor vertices (poplibs DynamicSlice1D): one per
        # block, splitting its region over the workers itself
        js, jc = split(size, 1)
        for s, c in zip(js, jc):
            if c == 0:
                continue
            l_tiles.append(plan.tile[b])
            l_fb.append(b_starts[b])
            l_fo.append(plan.pair[b])
            l_fs.append(s_starts[b] + s * w)
            l_ns.append(c * w)
            l_region.append(w)
            l_first.append(s)
    if l_tiles:
        tiles, fb, fo, fs, ns, region, first = (np.asarray(x, np.int64)
                                                for x in (l_tiles, l_fb, l_fo, l_fs, l_ns, l_region, l_first))
        cs = ctx.compute_set(suffix)
        if kind == "slice":
            fields = {"base": (base, fb, region * N), "offset": (offs, fo, 1), "out": (other, fs, ns)}
            ctx.g.add_vertices(cs, "DynamicSlice", tiles, fields, ip={"region": region, "rows": N, "first": first})
        else:
            fields = {"base": (base, fb, region * N), "offset": (offs, fo, 1), "update": (other, fs, ns)}
            ctx.g.add_vertices(cs, "DynamicUpdate", tiles, fields, ip={"region": region, "rows": N, "first": first})
        ctx.emit(ipu.Execute(cs, name=cs.name))
    return other_view if kind == "slice" else base_view


def _dynamic_slice(ctx, t, offsets, axes, sizes):
    cur = t
    for k, (a, s) in enumerate(zip(axes, sizes)):
        shape = list(cur.shape)
        shape[a] = s
        if _prod(shape) == 0:
            return None
        sl = _dynamic_one(ctx, "slice", _to_front(cur, a), offsets[k:k + 1], s, suffix=f"dynamic_slice{k}")
        cur = _from_front(sl, tuple(shape), a)
    return cur


def _dynamic_update(ctx, t, offsets, upd, axes, sizes, k=0, inplace=False):
    """t with the slice at the run-time offsets replaced by upd (a view of new storage). Several
    axes: slice the first axis, update the rest inside that slice, then write it back."""
    a, s = axes[0], sizes[0]
    if len(axes) > 1:
        inner = _dynamic_slice(ctx, t, offsets[k:k + 1], (a,), (s,))
        if inner is None:
            return t
        upd = _dynamic_update(ctx, inner, offsets, upd, axes[1:], sizes[1:], k + 1, inplace=True)
    if upd.numel == 0:
        return t
    up = _to_front(upd, a)
    res = _dynamic_one(ctx, "update", _to_front(t, a), offsets[k:k + 1], s, update=up, suffix=f"dynamic_update{k}",
                       inplace=inplace)
    return _from_front(res, t.shape, a)


@lowering_rule("dynamic_slice")
def dynamic_slice(ctx, op):
    t, index = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    out = _dynamic_slice(ctx, t, index.reshape(-1), op.attrs["axes"], op.attrs["sizes"])
    if out is None:
        return _empty_output(ctx, op)
    ctx.bind(op.outputs[0], out.reshape(tuple(op.outputs[0].shape)))


@lowering_rule("dynamic_update")
def dynamic_update(ctx, op):
    t, index, upd = (ctx.value(x) for x in op.inputs)
    if t.numel == 0:
        return _empty_output(ctx, op) if not _is_inplace(op) else ctx.bind(op.outputs[0], t)
    res = _dynamic_update(ctx, t, index.reshape(-1), upd, tuple(op.attrs["axes"]), tuple(op.attrs["sizes"]),
                          inplace=_is_inplace(op))
    if _is_inplace(op):
        if res is not t:
            ctx.copy(res, t, "dynamic_update/back")
        ctx.bind(op.outputs[0], t)
    elif res is t:
        out = ctx.new_output(op, 0, like=t if t.is_identity else None)
        ctx.copy(t, out, "copy")
    else:
        ctx.bind(op.outputs[0], res)


# -- onehot -----------------------------------------------------------------------------------


@lowering_rule("onehot")
def onehot(ctx, op):
    """Rows of `classes` outputs, one per index, each row whole on one tile; the indices and the
    (off, on) values are copied to the rows' tiles; one EncodeOneHot vertex per run of rows."""
    t, values = ctx.value(op.inputs[0]), ctx.value(op.inputs[1])
    C = int(op.attrs["num_classes"])
    axis = op.attrs["axis"]
    t_out = op.outputs[0]
    et = ctx.etype(t_out)
    n = t.numel
    if n * C == 0:
        return _empty_output(ctx, op)
    rows = ctx.g.add_variable(ctx.name("onehot/rows"), (n, C), et, ipu.TEMPORARY, debug=ctx.name())
    isz = et.itemsize
    from ..mapping import MIN_BYTES_PER_TILE

    min_rows = max(1, -(-MIN_BYTES_PER_TILE // (C * isz)))
    per_tile = max(-(-n // ctx.target.num_tiles), min_rows)
    row_tile = (np.arange(n) // per_tile) % ctx.target.num_tiles
    used = int(row_tile.max()) + 1
    from ..columns import _next_tile

    start = _next_tile(ctx, used)
    row_tile = (row_tile + start) % ctx.target.num_tiles
    rows.tile_of[:] = np.repeat(row_tile, C).astype(np.int32)
    idx = ctx.g.add_variable(ctx.name("onehot/indices"), (n,), t.dtype, ipu.TEMPORARY, debug=ctx.name())
    idx.tile_of[:] = row_tile.astype(np.int32)
    ctx.copy(t.reshape(n), idx, "onehot/indices")
    tiles_used = np.unique(row_tile)
    vals = ctx.g.add_variable(ctx.name("onehot/values"), (len(tiles_used), 2), values.dtype, ipu.TEMPORARY,
                              debug=ctx.name())
    vals.tile_of[:] = np.repeat(tiles_used, 2).astype(np.int32)
    ctx.copy(values.reshape(1, 2).broadcast((len(tiles_used), 2)), vals, "onehot/values")
    slot = {int(tt): k for k, tt in enumerate(tiles_used)}
    # runs of rows per tile, split over the workers
    brk = np.flatnonzero(np.diff(row_tile)) + 1
    run_starts = np.concatenate(([0], brk))
    run_counts = np.diff(np.append(run_starts, n))
    l_tiles, l_fi, l_fv, l_fo, l_cnt = [], [], [], [], []  # per vertex
    for s0, c0 in zip(run_starts, run_counts):
        tile = int(row_tile[s0])
        ss, cc = split(int(c0), ctx.target.worker_contexts)
        for s, c in zip(ss, cc):
            l_tiles.append(tile)
            l_fi.append(s0 + s)
            l_fv.append(2 * slot[tile])
            l_fo.append((s0 + s) * C)
            l_cnt.append(c)
    tiles, fi, fv, fo, cnt = (np.asarray(x, np.int64) for x in (l_tiles, l_fi, l_fv, l_fo, l_cnt))
    cs = ctx.compute_set("onehot")
    ctx.g.add_vertices(cs, "EncodeOneHot", tiles,
                       {"indices": (idx, fi, cnt), "values": (vals, fv, 2), "out": (rows, fo, cnt * C)},
                       ip={"classes": C})
    ctx.emit(ipu.Execute(cs, name=cs.name))
    A = _prod(t.shape[:axis])
    B = n // A if A else 0
    out = rows.reshape(A, B, C).transpose(0, 2, 1)
    ctx.bind(t_out, out.reshape(tuple(t_out.shape)))
