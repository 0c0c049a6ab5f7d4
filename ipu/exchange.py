"""The exchange kinds: `Copy(src, dst)` (an exchange phase after a sync) and `Sync`.

A copy becomes a table of byte runs contiguous at both ends (`copytables.runs`); its cycles
(`costs.exchange_tile_cycles`) and its exchange code (`costs.exchange_code_bytes`: sends, receive
regions and phase entry, charged to the tiles' `exchange_code` memory) come from one linear pass
over the runs (`costs.exchange_costs`).
"""
from __future__ import annotations


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
    src_off, dst_off, nbytes, src_tile, dst_tile = merge_runs(comp.address_runs(src, "Copy source"),
                                                              comp.address_runs(dst, "Copy destination"), isz)
    # cycles (multicast runs sent once, bus pairs) and exchange code from the phase's messages:
    # sends, receive regions, phase entry (costs.py)
    tile_cycles, extra, code = costs.exchange_costs(src_tile, dst_tile, src_off, dst_off, nbytes, comp.target)
    comp.add_exchange_code(code, p.name or f"copy {src.name} -> {dst.name}")
    staged = src.variable is dst.variable
    return comp.add_step("exchange", p.name or f"copy {src.name} -> {dst.name}",
                         int(tile_cycles.max(initial=0)) + extra, tile_cycles,
                         payload=CopyTable(src_off, dst_off, nbytes, staged), bytes_moved=int(nbytes.sum()))


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
