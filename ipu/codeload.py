"""Code loading from streaming memory: which vertex code is resident, which is loaded, and when
loaded code occupies tile memory.

Every function's vertex code sits on its tiles for the whole program by default (resident: the
`vertex_code` memory category). A function that a `CodeLoad` targets (or that is flagged
`Function.code_in_streaming_memory`) keeps its code in streaming memory instead, and the code is
live on the tiles only over the intervals PopXL's liveness rules give (PopXL user guide, "Code
loading from Streaming Memory"):

- a load makes the code live from the load; each call keeps it live up to the end of that call;
  the next load of the same function ends the previous interval (the code is dead between the last
  call and the next load);
- a call before any load means the code was live from the start of the program;
- after a branch (If / Switch) the code counts as loaded only if every branch loaded it; otherwise
  the branch point is treated as if no load happened: the code stays live from before the branch;
- a load inside a loop body that a call earlier in the body relies on (the next iteration's call
  uses this iteration's load) keeps the code live over the whole loop;
- a function may load another function (a CodeLoad inside a called function), never itself.

What moves is the vertex code of the compute sets a function executes itself (not those of the
functions it calls): per tile, the code bytes of each (codelet, field types) its vertices use there,
except what resident code on that tile already holds. Exchange, control and vertex state stay
resident (Poplar keeps exchange code and mutable vertex state always live).

Loaded code on a tile at a timeline position is the union of the code of the functions live there;
the `code_loaded` category is its peak per tile. A code-load step costs a remote load of every
tile's code bytes (ipu/remote.py: per-tile exchange time vs the busiest IPU's gateway-link time +
latency) plus the sync before it. Consecutive loads with nothing between them are one CodeLoad
node (the lowering merges them), so they share one sync and one transfer phase.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import costs, remote
from .errors import CompileError
from .program import Call, CodeLoad, Execute, If, Repeat, Sequence, Switch
from .timeline import timeline_steps

__all__ = ["CodeLiveness", "analyse"]


@dataclass
class CodeLiveness:
    """Resident and loaded vertex code of an Executable (Executable.code_liveness).

    Arrays over tiles: `resident` (vertex code always live), `loaded_peak` (the most loaded code
    live at once: the `code_loaded` category), `all_resident` (the vertex code per tile if nothing
    were loaded), `saved` (all_resident - resident - loaded_peak). Arrays over timeline positions
    (the positions of Executable.liveness; `ipu.timeline.timeline_steps` maps them to steps): `live`
    (loaded code summed over tiles) and `live_busiest` (loaded code on `busiest_tile`, the tile
    with the most code when loading).
    """

    # function name -> {"tile_bytes": int64[tiles], "total": int, "max_tile": int, "intervals": [(a, b)]}
    functions: dict
    resident: np.ndarray
    loaded_peak: np.ndarray
    all_resident: np.ndarray
    live: np.ndarray
    busiest_tile: int
    live_busiest: np.ndarray
    load_steps: list = field(default_factory=list)  # step ids of the code_load steps
    exact: bool = True  # False when the positions could not be matched (then: live everywhere)

    @property
    def saved(self) -> np.ndarray:
        return self.all_resident - self.resident - self.loaded_peak

    @property
    def peak_tile_bytes_resident(self) -> int:
        """Code on the busiest tile if all code were resident."""
        return int(self.all_resident.max(initial=0))

    @property
    def peak_tile_bytes_loaded(self) -> int:
        """Code on the busiest tile with loading: resident code plus the peak of loaded code."""
        return int((self.resident + self.loaded_peak).max(initial=0))

    def summary(self) -> dict:
        """JSON-ready figures for reports."""
        return {
            "functions": {k: {"total": v["total"], "max_tile": v["max_tile"],
                              "intervals": [list(x) for x in v["intervals"]]} for k, v in self.functions.items()},
            "resident_total": int(self.resident.sum()),
            "loaded_peak_total": int(self.loaded_peak.sum()),
            "all_resident_total": int(self.all_resident.sum()),
            "saved_total": int(self.saved.sum()),
            "peak_tile_bytes_resident": self.peak_tile_bytes_resident,
            "peak_tile_bytes_loaded": self.peak_tile_bytes_loaded,
            "busiest_tile": int(self.busiest_tile),
            "load_steps": list(self.load_steps),
            "exact": self.exact,
        }

    def by_step(self, exe) -> dict | None:
        """step id -> the most loaded code (summed over tiles) live at any position of that step,
        or None when positions cannot be matched to steps."""
        steps = timeline_steps(exe)
        if steps is None:
            return None
        out: dict[int, int] = {}
        for pos, sid in enumerate(steps):
            if pos < len(self.live):
                out[sid] = max(out.get(sid, 0), int(self.live[pos]))
        return out


# ------------------------------------------------------------------------------------------------
# which compute sets each function runs, which functions are loaded


def _collect(programs):
    execs: dict = {}  # owner id (None: main programs) -> (owner, [compute sets])
    loaded: dict = {}  # function id -> Function
    seen: set = set()

    def visit_function(f):
        if id(f) in seen:
            return
        seen.add(id(f))
        if f.code_in_streaming_memory:
            loaded[id(f)] = f
        visit(f.program, f)

    def visit(p, owner):
        if isinstance(p, Sequence):
            for q in p.programs:
                visit(q, owner)
        elif isinstance(p, Repeat):
            visit(p.body, owner)
        elif isinstance(p, If):
            visit(p.then_, owner)
            if p.else_ is not None:
                visit(p.else_, owner)
        elif isinstance(p, Switch):
            for q in p.cases.values():
                visit(q, owner)
            if p.default is not None:
                visit(p.default, owner)
        elif isinstance(p, Call):
            visit_function(p.function)
        elif isinstance(p, Execute):
            key = None if owner is None else id(owner)
            execs.setdefault(key, (owner, []))[1].append(p.compute_set)
        elif isinstance(p, CodeLoad):
            for f in p.functions:
                if f is owner:
                    raise CompileError(f"function {f.name!r} loads its own code (CodeLoad inside it); a function "
                                       f"can load other functions' code, not the code that is running")
                loaded[id(f)] = f
                visit_function(f)

    for p in programs:
        visit(p, None)
    return execs, loaded


def _key_masks(execs, n):
    """Code keys (codelet, field types, template values: `Codelet.code_variants`), their bytes, and
    per owner a (keys x tiles) bool mask."""
    index: dict = {}
    key_bytes: list = []
    per_owner: dict = {}
    for okey, (_, css) in execs.items():
        rows: dict = {}
        done = set()
        for cs in css:
            if id(cs) in done:
                continue
            done.add(id(cs))
            for chunk in cs.chunks:
                tiles = np.asarray(chunk.tiles, np.int64)
                for key, sel in chunk.codelet.code_variants(chunk.types, np.asarray(chunk.ip)):
                    k = index.get(key)
                    if k is None:
                        k = index[key] = len(key_bytes)
                        key_bytes.append(int(chunk.codelet.code_bytes(chunk.types)))
                    m = rows.get(k)
                    if m is None:
                        m = rows[k] = np.zeros(n, bool)
                    m[tiles if sel is None else tiles[sel]] = True
        per_owner[okey] = rows
    K = len(key_bytes)
    masks = {}
    for okey, rows in per_owner.items():
        m = np.zeros((K, n), bool)
        for k, row in rows.items():
            m[k] = row
        masks[okey] = m
    return np.asarray(key_bytes, np.int64), masks


# ------------------------------------------------------------------------------------------------
# liveness over the timeline


class _Walker:
    """Walks programs in the order (and with the positions) of timeline.Timeline, keeping for
    every loaded function its open live interval [start, end] (end < start: nothing live yet)."""

    def __init__(self, loaded_ids):
        self.pos = 0
        self.open = {f: [0, -1] for f in loaded_ids}  # before any load: live from the start if called
        self.closed = {f: [] for f in loaded_ids}
        self.events: list = []  # (function id, "load" | "call") in walk order

    def load(self, f, p):
        o = self.open[f]
        if o[1] >= o[0]:
            self.closed[f].append((o[0], o[1]))
        self.open[f] = [p, p]
        self.events.append((f, "load"))

    def call(self, f, a, b):
        o = self.open[f]
        o[1] = max(o[1], b)
        self.events.append((f, "call"))

    def branches(self, progs, pb):
        s0 = {f: list(o) for f, o in self.open.items()}
        finals = []
        for b in progs:
            self.open = {f: list(o) for f, o in s0.items()}
            if b is not None:
                self.walk(b)
            finals.append(self.open)
        merged = {}
        for f, o0 in s0.items():
            outs = [fin[f] for fin in finals]
            if all(o[0] > pb for o in outs):  # every branch loaded it: loaded from the earliest load
                merged[f] = [min(o[0] for o in outs), max(o[1] for o in outs)]
            else:  # some branch did not: as if no load happened, live from before the branch
                merged[f] = [o0[0], max([o0[1]] + [o[1] for o in outs])]
        self.open = merged

    def walk(self, p):
        if isinstance(p, Sequence):
            for q in p.programs:
                self.walk(q)
        elif isinstance(p, Repeat):
            a, ev0 = self.pos, len(self.events)
            self.walk(p.body)
            b = max(a, self.pos - 1)
            first: dict = {}
            loads: set = set()
            for f, kind in self.events[ev0:]:
                first.setdefault(f, kind)
                if kind == "load":
                    loads.add(f)
            for f in loads:
                if first.get(f) == "call":  # the next iteration's call uses this iteration's load
                    self.closed[f].append((a, b))
        elif isinstance(p, If):
            pb = self.pos
            self.pos += 1
            self.branches([p.then_, p.else_], pb)
        elif isinstance(p, Switch):
            pb = self.pos
            self.pos += 1
            self.branches(list(p.cases.values()) + [p.default], pb)
        elif isinstance(p, Call):
            a = self.pos
            self.walk(p.function.program)
            f = id(p.function)
            if f in self.open:
                self.call(f, a, max(a, self.pos - 1))
        elif isinstance(p, CodeLoad):
            for fn in p.functions:
                self.load(id(fn), self.pos)
            self.pos += 1
        else:  # every other node is a leaf with one position (as in timeline.Timeline)
            self.pos += 1

    def finish(self):
        for f, o in self.open.items():
            if o[1] >= o[0]:
                self.closed[f].append((o[0], o[1]))
        return self.closed


def _union_bytes(key_bytes, fmasks, fids):
    if not fids:
        return np.zeros(fmasks[next(iter(fmasks))].shape[1] if fmasks else 0, np.int64)
    m = np.zeros_like(fmasks[fids[0]])
    for f in fids:
        m |= fmasks[f]
    return (key_bytes[:, None] * m).sum(axis=0).astype(np.int64)


def analyse(programs, comp, positions: int) -> CodeLiveness | None:
    """Split vertex code into resident and loaded, set the cycles of every code_load step, and
    return the CodeLiveness (None when no function's code is loaded)."""
    execs, loaded = _collect(programs)
    if not loaded:
        return None
    target = comp.target
    n = target.num_tiles
    key_bytes, masks = _key_masks(execs, n)
    K = key_bytes.size
    resident_mask = np.zeros((K, n), bool)
    for okey, m in masks.items():
        if okey not in loaded:
            resident_mask |= m
    fmasks = {f: (masks[f] & ~resident_mask) if f in masks else np.zeros((K, n), bool) for f in loaded}
    all_mask = resident_mask.copy()
    for m in fmasks.values():
        all_mask |= m
    resident = (key_bytes[:, None] * resident_mask).sum(axis=0).astype(np.int64)
    all_resident = (key_bytes[:, None] * all_mask).sum(axis=0).astype(np.int64)

    # liveness
    w = _Walker(list(loaded))
    for p in programs:
        w.walk(p)
    intervals = w.finish()
    exact = w.pos == positions
    T = max(positions, 1)
    fids = list(loaded)
    live_mask = np.zeros((T, len(fids)), bool)
    for j, f in enumerate(fids):
        if not exact:
            live_mask[:, j] = True
            continue
        for a, b in intervals[f]:
            a, b = max(int(a), 0), min(int(b), T - 1)
            if b >= a:
                live_mask[a:b + 1, j] = True
    uniq, inverse = np.unique(live_mask, axis=0, return_inverse=True)
    inverse = np.asarray(inverse).reshape(-1)
    row_bytes = np.stack([_union_bytes(key_bytes, fmasks, [fids[j] for j in np.flatnonzero(row)])
                          if row.any() else np.zeros(n, np.int64) for row in uniq])
    loaded_peak = row_bytes.max(axis=0)
    live = row_bytes.sum(axis=1)[inverse].astype(np.int64)
    busiest = int(np.argmax(resident + loaded_peak)) if n else 0
    live_busiest = row_bytes[:, busiest][inverse].astype(np.int64)

    # cycles of the code-load steps
    sync = costs.sync_cycles(target)
    load_steps = []
    for s in comp.steps:
        if not isinstance(s.payload, remote.CodeLoadInfo):
            continue
        tb = _union_bytes(key_bytes, fmasks, [id(f) for f in s.payload.objects])
        s.tile_cycles, s.cycles = remote.code_load_cycles(tb, target, sync)
        s.bytes_moved = int(tb.sum())
        s.payload.tile_bytes = tb
        load_steps.append(s.id)

    functions = {}
    for f in fids:
        fn = loaded[f]
        name = fn.name if fn.name not in functions else f"{fn.name}#{f}"
        tb = (key_bytes[:, None] * fmasks[f]).sum(axis=0).astype(np.int64)
        functions[name] = {"tile_bytes": tb, "total": int(tb.sum()), "max_tile": int(tb.max(initial=0)),
                           "intervals": sorted(intervals[f])}
    return CodeLiveness(functions, resident, loaded_peak.astype(np.int64), all_resident, live, busiest,
                        live_busiest, load_steps, exact)
