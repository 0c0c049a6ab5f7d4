"""The exchange kinds: `Copy(src, dst)` (an exchange phase after a sync) and `Sync`.

A copy becomes a table of byte runs contiguous at both ends (`copytables.runs`); its cycles
(`costs.exchange_tile_cycles`) and its exchange code (`costs.exchange_code_bytes`: sends, receive
regions and phase entry, charged to the tiles' `exchange_code` memory) come from one linear pass
over the runs (`costs.exchange_costs`).
"""
from __future__ import annotations

import hashlib

import numpy as np

from . import costs
from .copytables import CopyTable, copy_runs, copy_runs_staged, merge_runs
from .errors import CompileError
from .kinds import ProgramKind, StepKind, Use, register_kind
from .nodes import Seq, StepRef
from .program import Copy, Sync

__all__ = ["EXCHANGE_STEP", "SYNC_STEP"]


def _compile_copy(comp, p: Copy):
    if p.src.numel == 0 and p.dst.numel == 0:  # an empty exchange moves nothing: no sync either
        return StepRef(_copy_step(comp, p).id)
    sync = comp.sync(p.name or "copy")
    return Seq((sync, StepRef(_copy_step(comp, p).id)))


def _copy_step(comp, p: Copy):
    src, dst = p.src, p.dst
    if src.numel != dst.numel:
        raise CompileError(f"Copy {p.name!r}: {src.name!r} has {src.numel} elements but {dst.name!r} has {dst.numel}")
    if src.dtype != dst.dtype:
        raise CompileError(f"Copy {p.name!r}: {src.name!r} is {src.dtype.name} but {dst.name!r} is {dst.dtype.name}; "
                           "cast with a compute set")
    if src.numel == 0:
        return comp.add_step("exchange", p.name or "copy", 0)
    isz = src.dtype.itemsize
    staged = src.variable is dst.variable
    shapes = comp.cached("copy shapes", dict)
    key = (_index_token(src), _index_token(dst), _pieces_token(comp, src), _pieces_token(comp, dst), isz, staged)
    known = shapes.get(key)
    table = None if known is None else known.shifted(comp, src, dst)
    if table is None:
        src_off, dst_off, nbytes, src_tile, dst_tile = merge_runs(comp.address_runs(src, "Copy source"),
                                                                  comp.address_runs(dst, "Copy destination"), isz)
        # cycles (multicast runs sent once, bus pairs) and exchange code from the phase's messages:
        # sends, receive regions, phase entry (costs.py)
        tile_cycles, extra, code = costs.exchange_costs(src_tile, dst_tile, src_off, dst_off, nbytes, comp.target)
        if known is None:
            shapes[key] = _Shape(src, dst, comp, src_off, dst_off, nbytes, src_tile, dst_tile, tile_cycles, extra, code)
    else:
        src_off, dst_off, nbytes, tile_cycles, extra, code = table
    comp.add_exchange_code(code, p.name or f"copy {src.name} -> {dst.name}")
    return comp.add_step("exchange", p.name or f"copy {src.name} -> {dst.name}",
                         int(tile_cycles.max(initial=0)) + extra, tile_cycles,
                         payload=CopyTable(src_off, dst_off, nbytes, staged), bytes_moved=int(nbytes.sum()))


def _index_token(t):
    """Which elements of its variable a view reads, in which shape (a digest of its index)."""
    parts = t.index_parts()
    if parts[0] == "identity":
        return ("identity", t.shape, t.variable.numel)
    h = hashlib.sha256()
    for a in parts[1:]:
        h.update(str(a.dtype).encode())
        h.update(np.ascontiguousarray(a).data)
    return (parts[0], t.shape, h.digest())


def _pieces_token(comp, t):
    """A digest of the pieces (elements and tiles, not addresses) of the view's variable."""
    vid = t.variable.id

    def digest():
        L = comp.layouts.get(vid)
        if L is None:
            return None
        h = hashlib.sha256()
        for a in (L.starts, L.stops, L.tiles):
            h.update(np.ascontiguousarray(a, np.int64).data)
        return h.digest()

    return comp.cached(("pieces token", vid), digest)


class _Shape:
    """A copy compiled before, for copies of the same views of variables laid out alike: when each
    variable's pieces are those of the first copy's variable, each tile's pieces moved by one
    offset (a layer's weights, activations and product temporaries against the previous layer's),
    its runs are the first copy's, every offset moved by its tile's shift, and so are its costs:
    merging runs compares offsets on one tile (both moved alike), the multicast and bus-pair
    counts compare source offsets, which lie on one tile (costs.exchange_costs), and receive
    regions compare destination offsets on one tile. The table is then made by one shift
    instead of address runs, merging and costing (BERT-base's layers repeat their exchanges)."""

    __slots__ = ("src_layout", "dst_layout", "runs", "costs")

    def __init__(self, src, dst, comp, src_off, dst_off, nbytes, src_tile, dst_tile, tile_cycles, extra, code):
        self.src_layout = comp.layouts[src.variable.id]
        self.dst_layout = comp.layouts[dst.variable.id]
        small = np.int32 if comp.target.num_tiles < 2 ** 31 else np.int64
        self.runs = (src_off, dst_off, nbytes, src_tile.astype(small), dst_tile.astype(small))
        self.costs = (tile_cycles.copy(), extra, code.copy())

    @staticmethod
    def _shift(first, layout, n: int):
        """Per tile, the offset that moves `first`'s pieces onto `layout`'s, or None when the
        pieces differ or one tile's pieces moved by different offsets."""
        if layout is first:
            return np.zeros(n, np.int64)
        if not (np.array_equal(layout.starts, first.starts) and np.array_equal(layout.stops, first.stops)
                and np.array_equal(layout.tiles, first.tiles)):
            return None
        delta = layout.addr.astype(np.int64) - first.addr.astype(np.int64)
        shift = np.zeros(n, np.int64)
        shift[first.tiles] = delta
        return shift if np.array_equal(shift[first.tiles], delta) else None

    def shifted(self, comp, src, dst):
        """(src_off, dst_off, nbytes, tile_cycles, extra, code) of copying src to dst, or None."""
        ls, ld = comp.layouts.get(src.variable.id), comp.layouts.get(dst.variable.id)
        if ls is None or ld is None:
            return None
        n = comp.target.num_tiles
        s_shift = self._shift(self.src_layout, ls, n)
        d_shift = None if s_shift is None else self._shift(self.dst_layout, ld, n)
        if d_shift is None:
            return None
        src_off, dst_off, nbytes, src_tile, dst_tile = self.runs
        tile_cycles, extra, code = self.costs
        return src_off + s_shift[src_tile], dst_off + d_shift[dst_tile], nbytes, tile_cycles.copy(), extra, code


def _copy_uses(p: Copy):
    v = p.dst.variable
    return [Use(p.src.variable, True, False), Use(v, False, True, p.dst.numel == v.numel)]


def _run_copy(engine, table: CopyTable, reps) -> None:
    src_off, dst_off, nbytes = table.runs  # one read: the compiled loop's plan may replace them (CopyTable.share)
    if table.staged:
        for r in reps:
            copy_runs_staged(engine.memory[r], src_off, dst_off, nbytes)
        return
    for r in reps:
        m = engine.memory[r]
        copy_runs(m, m, src_off, dst_off, nbytes)


def _compile_sync(comp, p: Sync):
    return StepRef(comp.add_step("sync", p.name or "sync", costs.sync_cycles(comp.target)).id)


EXCHANGE_STEP = StepKind("exchange", "exchange")
SYNC_STEP = StepKind("sync", "sync")
register_kind(ProgramKind("exchange", (Copy,), _compile_copy, _copy_uses, CopyTable, _run_copy,
                          lambda loop, table: loop.exchange(table), (EXCHANGE_STEP,)))
register_kind(ProgramKind("sync", (Sync,), _compile_sync, lambda p: [], steps=(SYNC_STEP,)))
