"""The compute kind: `Execute(compute_set)` runs every vertex of a compute set (one BSP compute phase).

Compiling groups the vertices by (codelet, field types) into kernel groups: one kernel call runs a
whole group, with the element offset of every field of every vertex in the typed views of tile
memory. The step's cycles come from the codelets' cost models scheduled on the worker contexts
(`costs.compute_set_tile_cycles`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import compile_ahead, costs
from .codelet import IN, INOUT, OUT
from .errors import CompileError
from .graph import ComputeSet
from .kinds import ProgramKind, StepKind, Use, register_kind
from .nodes import StepRef
from .program import Execute
from .tensor import Variable

__all__ = ["KernelGroup", "Vertices"]


@dataclass
class KernelGroup:
    """The vertices of one compute set that run through one kernel call."""

    codelet: object
    types: tuple
    tiles: np.ndarray
    off: np.ndarray  # element offsets into the typed views, int64[V, F]
    cnt: np.ndarray
    fp: np.ndarray
    ip: np.ndarray
    vertex_cycles: np.ndarray


@dataclass(eq=False)
class Vertices:
    """The payload of a compute step: its kernel groups."""

    groups: list


def _compile(comp, p: Execute):
    cs = p.compute_set
    if not isinstance(cs, ComputeSet):
        raise CompileError("Execute takes a ComputeSet")
    groups, tile_cycles, nverts = comp.cached(("compute_set", id(cs)), lambda: _compile_compute_set(comp, cs))
    # the tiles with vertices, in order (a count per tile rather than a sort of every vertex's tile)
    tiles = (np.flatnonzero(np.bincount(np.concatenate([g.tiles for g in groups]), minlength=comp.target.num_tiles))
             if groups else np.zeros(0, np.int64))
    step = comp.add_step("compute", p.name or cs.name, int(tile_cycles.max(initial=0)), tile_cycles,
                         payload=Vertices(groups), vertices=nverts, debug=cs.debug, tiles=tiles)
    return StepRef(step.id)


def _compile_compute_set(comp, cs: ComputeSet):
    by_key: dict = {}
    for chunk in cs.chunks:
        c = chunk.codelet
        n = len(chunk.tiles)
        off = np.zeros((n, len(c.fields)), np.int64)
        for j, var in enumerate(chunk.field_vars):
            off[:, j] = _field_offsets(comp, cs, chunk, j, var)
        by_key.setdefault((c.name, chunk.types), []).append((chunk, off))
    groups = []
    all_tiles, all_cycles, all_sup, all_further = [], [], [], []
    target = comp.target
    for (name, types), items in by_key.items():
        c = items[0][0].codelet
        tiles = np.concatenate([ch.tiles for ch, _ in items])
        off = np.concatenate([o for _, o in items])
        cnt = np.concatenate([ch.field_count for ch, _ in items])
        fp = np.concatenate([ch.fp for ch, _ in items])
        ip = np.concatenate([ch.ip for ch, _ in items])
        vc = np.asarray(c.cycles(types, cnt, fp, ip, target), np.int64).reshape(-1)
        if vc.shape[0] != tiles.shape[0]:
            raise CompileError(f"codelet {name}: cost model returned {vc.shape[0]} values for "
                               f"{tiles.shape[0]} vertices")
        further = np.concatenate([np.zeros(len(ch.tiles), np.bool_) if ch.region is None else ch.region > 0
                                  for ch, _ in items])  # the further regions of multi-region vertices
        state = np.asarray(c.vertex_state_bytes(types, cnt, ip), np.int64)
        if further.any():
            vc = np.where(further, c.further_region_cycles(types, cnt, fp, ip, target, vc), vc)
            state = np.where(further, 0, state)
        if c.multi_region:
            state = state + np.asarray(c.region_state(types, cnt, ip), np.int64)
        groups.append(KernelGroup(c, types, tiles, np.ascontiguousarray(off), np.ascontiguousarray(cnt),
                                  np.ascontiguousarray(fp), np.ascontiguousarray(ip), vc))
        all_tiles.append(tiles)
        all_cycles.append(vc)
        all_sup.append(np.full(len(tiles), c.supervisor))
        all_further.append(further)
        # memory: vertex state per vertex, code once per (codelet, types, template values) per tile
        for key, sel in c.code_variants(types, ip):
            comp.add_vertex_memory(tiles if sel is None else tiles[sel], key, c.code_bytes(types),
                                   state if sel is None else state[sel], cs.name)
    if all_tiles:
        tile_cycles = costs.compute_set_tile_cycles(np.concatenate(all_tiles), np.concatenate(all_cycles),
                                                    np.concatenate(all_sup), target, np.concatenate(all_further))
    else:
        tile_cycles = np.zeros(target.num_tiles, np.int64)
    return groups, tile_cycles, cs.num_vertices


def _field_offsets(comp, cs, chunk, j, var) -> np.ndarray:
    L = comp.layouts[var.id]
    s = chunk.field_start[:, j]
    k = chunk.field_count[:, j]
    p = np.searchsorted(L.starts, s, side="right") - 1
    p = np.clip(p, 0, max(len(L.starts) - 1, 0))
    isz = var.dtype.itemsize
    if len(L.starts) == 0:
        return np.zeros(len(s), np.int64)
    inside = s + k <= L.stops[p]
    on_tile = L.tiles[p] == chunk.tiles
    ok = (k == 0) | (inside & on_tile)
    if not ok.all():
        v = int(np.flatnonzero(~ok)[0])
        fname = chunk.codelet.fields[j].name
        tile = int(chunk.tiles[v])
        elems = np.arange(s[v], s[v] + k[v])
        _, el_tiles = L.element_addresses(elems)
        others = sorted(set(int(t) for t in el_tiles) - {tile})
        if others:
            raise CompileError(
                f"compute set {cs.name!r}: a {chunk.codelet.name} vertex on tile {tile} connects field "
                f"{fname!r} to elements [{s[v]}, {s[v] + k[v]}) of {var.name!r}, which live on tile(s) "
                f"{others[:8]}. A vertex can only touch memory of its own tile: Copy the data to tile "
                f"{tile} first (an exchange), or put the vertex where the data is."
            )
        raise CompileError(
            f"compute set {cs.name!r}: a {chunk.codelet.name} vertex on tile {tile} connects field "
            f"{fname!r} to elements [{s[v]}, {s[v] + k[v]}) of {var.name!r}, which are not contiguous in "
            f"tile memory (they span several pieces of its tile mapping); split the vertex per piece."
        )
    byte = L.addr[p] + (s - L.starts[p]) * isz
    return np.where(k == 0, 0, byte // isz)


def _uses(p: Execute) -> list:
    """Every variable the vertices touch, once: read when a field reads it, written when a field
    writes it, and wholly written when the written fields together cover every element."""
    reads: dict[int, bool] = {}
    writes: dict[int, list] = {}
    vars_: dict[int, Variable] = {}
    for chunk in p.compute_set.chunks:
        for j, (f, v) in enumerate(zip(chunk.codelet.fields, chunk.field_vars)):
            vars_[v.id] = v
            reads[v.id] = reads.get(v.id, False) or f.direction in (IN, INOUT)
            if f.direction in (OUT, INOUT):
                writes.setdefault(v.id, []).append((chunk.field_start[:, j], chunk.field_count[:, j]))
    out = []
    for vid, v in vars_.items():
        w = writes.get(vid, [])
        whole = bool(w) and _covers(np.concatenate([a for a, _ in w]), np.concatenate([b for _, b in w]), v.numel)
        out.append(Use(v, reads[vid], bool(w), whole))
    return out


def _covers(starts: np.ndarray, counts: np.ndarray, numel: int) -> bool:
    """True if the element ranges [start, start + count) together cover [0, numel)."""
    keep = counts > 0
    if not keep.any():
        return numel == 0
    s = starts[keep]
    e = s + counts[keep]
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    return bool(s[0] <= 0 and reach[-1] >= numel and np.all(s[1:] <= reach[:-1]))


def _run(engine, payload: Vertices, reps) -> None:
    for g in payload.groups:
        kern = g.codelet.kernel()
        if compile_ahead.pending:  # a worker may be compiling it (until this process has called it)
            compile_ahead.claim(kern, g.types)
        for r in reps:
            kern(tuple(engine.view(r, t.storage) for t in g.types), g.off, g.cnt, g.fp, g.ip)


def _lower(loop, payload: Vertices):
    """One kernel call per group, all in the compiled loop (or none: a kernel it cannot call)."""
    ops = []
    for g in payload.groups:
        op = loop.kernel(g)
        if op is None:
            return None
        ops.append(op)
    return ops


COMPUTE_STEP = StepKind("compute", "compute")
register_kind(ProgramKind("compute", (Execute,), _compile, _uses, Vertices, _run, _lower, (COMPUTE_STEP,)))
