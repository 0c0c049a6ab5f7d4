"""Ops that need a whole row along an axis at once: argmax, argmin, topk, median and cumsum.

The reduced axes are moved last and each row (all the elements one result depends on) is
brought to a single tile with one Copy (an exchange; skipped when the rows already sit whole on
tiles). Rows are spread over the tiles, at least MIN_BYTES_PER_TILE of them per tile used, and
each tile's run of rows is split over its six workers: one ArgMinMax / TopK / Median / CumSum
vertex per part. Results stay on the rows' tiles and are bound as views.
"""
from __future__ import annotations

import numpy as np

import ipu

from ..columns import _next_tile, split
from ..mapping import MIN_BYTES_PER_TILE
from ..registry import lowering_rule


def _prod(shape) -> int:
    return int(np.prod(shape, dtype=np.int64)) if len(shape) else 1


class Rows:
    """x viewed as (rows, K) with `axes` last, every row whole on one tile."""

    def __init__(self, ctx, x: ipu.Tensor, axes, suffix: str):
        rank = x.rank
        axes = sorted(a % rank for a in axes) if rank else []
        self.kept = [d for d in range(rank) if d not in axes]
        self.axes = axes
        self.kept_shape = tuple(x.shape[d] for d in self.kept)
        self.rows = _prod(self.kept_shape)
        self.K = _prod([x.shape[d] for d in axes])
        self.x = x
        if self.rows * self.K == 0:
            self.var = None
            return
        xp = x.transpose(self.kept + axes).reshape(self.rows, self.K) if rank else x.reshape(1, 1)
        var = xp.variable
        tiles = var.tile_of.reshape(-1)
        if (var.numel == self.rows * self.K and np.array_equal(xp.flat_index(), np.arange(var.numel))
                and np.all(tiles.reshape(self.rows, self.K) == tiles.reshape(self.rows, self.K)[:, :1])):
            self.var = var  # every row already lies whole on one tile
            self.row_tile = tiles.reshape(self.rows, self.K)[:, 0].astype(np.int64)
        else:
            T = ctx.target.num_tiles
            min_rows = max(1, -(-MIN_BYTES_PER_TILE // (self.K * x.dtype.itemsize)))
            per_tile = max(-(-self.rows // T), min_rows)
            row_tile = np.arange(self.rows, dtype=np.int64) // per_tile
            start = _next_tile(ctx, int(row_tile[-1]) + 1)
            self.row_tile = (row_tile + start) % T
            self.var = ctx.g.add_variable(ctx.name(f"{suffix}/rows"), (self.rows, self.K), x.dtype, ipu.TEMPORARY,
                                          debug=ctx.name())
            self.var.tile_of[:] = np.repeat(self.row_tile, self.K).astype(np.int32)
            ctx.copy(xp, self.var, f"{suffix}/rows")
        # runs of rows on one tile, each split over the workers
        brk = np.flatnonzero(np.diff(self.row_tile)) + 1
        starts = np.concatenate(([0], brk)).astype(np.int64)
        counts = np.diff(np.append(starts, self.rows))
        t_l, s_l, c_l = [], [], []
        for s0, c0 in zip(starts, counts):
            ss, cc = split(int(c0), ctx.target.worker_contexts)
            for s, c in zip(ss, cc):
                t_l.append(int(self.row_tile[s0]))
                s_l.append(int(s0 + s))
                c_l.append(int(c))
        self.v_tile = np.asarray(t_l, np.int64)
        self.v_row = np.asarray(s_l, np.int64)
        self.v_rows = np.asarray(c_l, np.int64)

    def output(self, ctx, per_row: int, et, name: str) -> ipu.Variable:
        """A (rows, per_row) variable with each row on its input row's tile."""
        v = ctx.g.add_variable(ctx.name(name), (self.rows, per_row), et, ipu.TEMPORARY, debug=ctx.name())
        if self.rows * per_row:
            v.tile_of[:] = np.repeat(self.row_tile, per_row).astype(np.int32)
        return v

    def restore(self, view: ipu.Tensor, last: int) -> ipu.Tensor:
        """A (rows, last) result back in the input's axis order, the reduced axis (one) of size
        `last`."""
        axis = self.axes[0]
        v = view.reshape(self.kept_shape + (last,))
        perm = list(range(len(self.kept)))
        perm.insert(axis, len(self.kept))
        return v.transpose(tuple(perm))


def _execute(ctx, name, codelet, tiles, fields, ip):
    cs = ctx.compute_set(name)
    ctx.g.add_vertices(cs, codelet, tiles, fields, ip=ip)
    ctx.emit(ipu.Execute(cs, name=cs.name))


def _require_rows(op, r: Rows):
    if r.K == 0 and r.rows:
        raise ValueError(f"{op.type} {op.name!r}: the reduced axes of {r.x.shape} are empty; there is no value")


# A row may take at most this share of a tile's memory; a longer row is split into chunks on
# several tiles and arg-reduced in two stages (popnn::argMax's gather then sparse stages).
ROW_SHARE_OF_TILE = 0.25


@lowering_rule("argmax", "argmin")
def arg_reduce(ctx, op):
    x = ctx.value(op.inputs[0])
    t_out = op.outputs[0]
    axis = op.attrs["axis"]
    K = x.shape[axis] if x.rank else 1
    code = 0 if op.type == "argmax" else 1
    if K * x.dtype.itemsize > ctx.target.bytes_per_tile * ROW_SHARE_OF_TILE and t_out.nelms:
        out = _arg_reduce_long_rows(ctx, x, axis, code, op.type)
        ctx.bind(t_out, out.reshape(tuple(t_out.shape)))
        return
    r = Rows(ctx, x, (axis,), op.type)
    _require_rows(op, r)
    out = r.output(ctx, 1, ipu.INT32, op.type)
    if r.var is not None:
        _execute(ctx, op.type, "ArgMinMax", r.v_tile,
                 {"in": (r.var, r.v_row * r.K, r.v_rows * r.K), "out": (out, r.v_row, r.v_rows)},
                 {"row": r.K, "op": code})
    ctx.bind(t_out, out.reshape(tuple(t_out.shape)))


def _arg_reduce_long_rows(ctx, x, axis, code, name):
    """Rows longer than a tile's share: each row in chunks over several tiles (six chunks per tile,
    one per worker); stage 1 finds every chunk's best (value, index in the row), stage 2 brings a
    row's partials to one tile and picks the best of them."""
    T = ctx.target.num_tiles
    W = ctx.target.worker_contexts
    kept = [d for d in range(x.rank) if d != axis]
    rows = _prod([x.shape[d] for d in kept])
    K = x.shape[axis]
    isz = x.dtype.itemsize
    tiles_per_row = -(-K * isz // int(ctx.target.bytes_per_tile * ROW_SHARE_OF_TILE))
    C = min(K, tiles_per_row * W)
    bounds = np.linspace(0, K, C + 1).astype(np.int64)
    start = _next_tile(ctx, min(T, rows * tiles_per_row))
    chunk_tile = (start + np.arange(rows * C) // W) % T  # (row, chunk) -> tile, W chunks per tile
    xv = ctx.g.add_variable(ctx.name(f"{name}/chunks"), (rows, K), x.dtype, ipu.TEMPORARY, debug=ctx.name())
    lengths = np.diff(bounds)
    xv.tile_of[:] = np.repeat(chunk_tile, np.tile(lengths, rows)).astype(np.int32)
    ctx.copy(x.transpose(kept + [axis]).reshape(rows, K), xv, f"{name}/chunks")
    pv = ctx.g.add_variable(ctx.name(f"{name}/partial_values"), (rows, C), x.dtype, ipu.TEMPORARY, debug=ctx.name())
    pi = ctx.g.add_variable(ctx.name(f"{name}/partial_indices"), (rows, C), ipu.INT32, ipu.TEMPORARY,
                            debug=ctx.name())
    pv.tile_of[:] = chunk_tile.astype(np.int32)
    pi.tile_of[:] = chunk_tile.astype(np.int32)
    r_of = np.repeat(np.arange(rows, dtype=np.int64), C)
    c_of = np.tile(np.arange(C, dtype=np.int64), rows)
    _execute(ctx, f"{name}/partial", "ArgMinMaxPartial", chunk_tile,
             {"in": (xv, r_of * K + bounds[c_of], lengths[c_of]), "value": (pv, r_of * C + c_of, 1),
              "index": (pi, r_of * C + c_of, 1)},
             {"op": code, "base": bounds[c_of]})
    # stage 2: a row's partials on the tile of its first chunk
    row_tile = chunk_tile.reshape(rows, C)[:, 0]
    gv = ctx.g.add_variable(ctx.name(f"{name}/values"), (rows, C), x.dtype, ipu.TEMPORARY, debug=ctx.name())
    gi = ctx.g.add_variable(ctx.name(f"{name}/indices"), (rows, C), ipu.INT32, ipu.TEMPORARY, debug=ctx.name())
    out = ctx.g.add_variable(ctx.name(name), (rows,), ipu.INT32, ipu.TEMPORARY, debug=ctx.name())
    for v in (gv, gi):
        v.tile_of[:] = np.repeat(row_tile, C).astype(np.int32)
    out.tile_of[:] = row_tile.astype(np.int32)
    ctx.copy(pv, gv, f"{name}/gather_values")
    ctx.copy(pi, gi, f"{name}/gather_indices")
    rr = np.arange(rows, dtype=np.int64)
    _execute(ctx, f"{name}/combine", "ArgMinMaxCombine", row_tile,
             {"values": (gv, rr * C, C), "indices": (gi, rr * C, C), "out": (out, rr, 1)}, {"op": code})
    return out


@lowering_rule("topk")
def topk(ctx, op):
    x = ctx.value(op.inputs[0])
    k = int(op.attrs["k"])
    axis = op.attrs["axis"]
    r = Rows(ctx, x, (axis,), "topk")
    vals = r.output(ctx, k, x.dtype, "topk/values")
    idx = r.output(ctx, k, ipu.INT32, "topk/indices")
    if r.var is not None and k > 0:
        _execute(ctx, "topk", "TopK", r.v_tile,
                 {"in": (r.var, r.v_row * r.K, r.v_rows * r.K), "values": (vals, r.v_row * k, r.v_rows * k),
                  "indices": (idx, r.v_row * k, r.v_rows * k)},
                 {"row": r.K, "k": k, "largest": int(op.attrs["largest"]), "sorted": int(op.attrs["sorted"])})
    ctx.bind(op.outputs[0], r.restore(vals, k))
    ctx.bind(op.outputs[1], r.restore(idx, k))


@lowering_rule("median")
def median(ctx, op):
    x = ctx.value(op.inputs[0])
    r = Rows(ctx, x, tuple(op.attrs["axes"]), "median")
    _require_rows(op, r)
    vals = r.output(ctx, 1, x.dtype, "median/values")
    idx = r.output(ctx, 1, ipu.INT32, "median/indices")
    if r.var is not None:
        _execute(ctx, "median", "Median", r.v_tile,
                 {"in": (r.var, r.v_row * r.K, r.v_rows * r.K), "values": (vals, r.v_row, r.v_rows),
                  "indices": (idx, r.v_row, r.v_rows)},
                 {"row": r.K})
    ctx.bind(op.outputs[0], vals.reshape(tuple(op.outputs[0].shape)))
    ctx.bind(op.outputs[1], idx.reshape(tuple(op.outputs[1].shape)))


@lowering_rule("cumsum")
def cumsum(ctx, op):
    x = ctx.value(op.inputs[0])
    if x.rank == 0:
        out = ctx.new_output(op, 0)
        ctx.copy(x, out, "cumsum")
        return
    axis = op.attrs["axis"]
    r = Rows(ctx, x, (axis,), "cumsum")
    out = r.output(ctx, r.K, x.dtype, "cumsum")
    if r.var is not None:
        _execute(ctx, "cumsum", "CumSum", r.v_tile,
                 {"in": (r.var, r.v_row * r.K, r.v_rows * r.K), "out": (out, r.v_row * r.K, r.v_rows * r.K)},
                 {"row": r.K, "exclusive": int(op.attrs.get("exclusive", False)),
                  "reverse": int(op.attrs.get("reverse", False))})
    ctx.bind(op.outputs[0], r.restore(out, r.K))
