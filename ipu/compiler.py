"""The compiler: a graph and its programs into an Executable.

1. Walk the program trees in execution order (calls expanded) to get the timeline: the segments
   in which each variable is live (one per call for a function's temporaries) and the loops
   (`ipu.timeline`).
2. Plan memory: an address for every piece of every used variable on its tile (`ipu.memory`).
3. Turn every leaf into steps with precomputed tables through its program kind (`ipu.kinds`:
   compute.py, exchange.py, streams.py, remote.py, collectives.py); control nodes (Sequence,
   Repeat, If, Switch, Call) become the typed node tree the engine walks (`ipu.nodes`). Each
   step carries its cycles on every tile from the cost models.

Program kinds use the compiler through its public methods only: `add_step`, `sync`,
`addresses`, `address_runs`, `scalar_ref`, `cached`, `add_vertex_memory`, `add_exchange_code`, and the
read-only `target`, `graph`, `layouts` and `steps`.
"""
from __future__ import annotations

import numpy as np

from . import codeload, compile_ahead, compile_progress, costs, forwarding, hostmem
from . import collectives, compute, exchange, remote, streams  # noqa: F401  (the built-in program kinds)
from .errors import CompileError, MappingError
from .executable import Executable, Layout, Step
from .graph import Function, Graph
from .kinds import StepKind, program_kind_of, register_step_kind, step_kind
from .memory import CATEGORIES, MemoryPlan, align, check_fits, place_pieces
from .nodes import Branch, CallRef, Loop, MultiBranch, ScalarRef, Seq, StepRef
from .program import Call, If, Program, Repeat, Sequence, Switch
from .target import Target
from .tensor import CONSTANT, TEMPORARY, VARIABLE, Tensor
from .timeline import Timeline, timeline_steps

__all__ = ["CONTROL_CODE", "Compiler", "compile"]

# Control code: every tile runs its own supervisor program, the program tree as that tile sees it.
# Poplar counts it per program and tile (libpva's Program.controlCodeByTile; the memory category
# controlCode), so a step costs code only on the tiles it concerns, except the syncs every tile
# takes part in. Per step, in 32-bit supervisor instructions (Graphcore's IPU ISA: 4 bytes each;
# a derivation, the instruction counts are assumptions):
CONTROL_CODE = {
    "sync": 4,  # the sync instruction, on every tile
    "compute": 24,  # a tile with vertices in the compute set: the vertex list's address and count,
    #                 the call of the launcher that runs them on the workers, the return (6)
    "exchange": 4,  # a tile taking part in an exchange: the call into its exchange code (the code
    #                 itself is exchange_code, costs.exchange_code_bytes)
    "step": 8,  # any other step or control node (stream and remote transfers, branches, a loop's
    #            counter and branch, a call and its return): a pair, on every tile
}

_FOREVER = np.iinfo(np.int64).max // 4

# the steps the compiler makes itself: the decision of an If / Switch, and the syncs it inserts
# before transfers (the Sync program kind makes the same step kind)
BRANCH_STEP = register_step_kind(StepKind("branch", "control"))
SYNC_STEP = register_step_kind(StepKind("sync", "sync"))


# ------------------------------------------------------------------------------------------------
# 2. memory


def _plan_memory(graph: Graph, used: dict, segments: dict, target: Target):
    live_vars = [v for v in graph.variables if v.category != TEMPORARY or v.id in used]
    empty = np.zeros(0, np.int64)
    layouts = {}
    owners, parts, segs_of = [], [], []  # the variables holding memory, their pieces, their segments
    for v in live_vars:
        if v.numel == 0:  # holds no memory: every step over it moves or computes nothing
            layouts[v.id] = Layout(v, empty, empty, empty, empty)
            continue
        unmapped = v.unmapped()
        if unmapped:
            raise MappingError(
                f"tensor {v.name!r} has {unmapped} of {v.numel} elements without a tile mapping; "
                f"call set_tile_mapping or map_linearly on it before compiling"
            )
        owners.append(v)
        parts.append(v.pieces())
        # every piece of a temporary is live in the variable's segments (ipu/timeline.py)
        segs_of.append(np.array([(-1, _FOREVER)] if v.category != TEMPORARY else segments[v.id],
                                np.int64).reshape(-1, 2))
    # the pieces of all of them, concatenated once (per-variable arrays, then one concatenation
    # each, cost ~0.5 s at BERT-base size: 2,095 variables, 5.58 M pieces)
    var_pieces = np.array([len(p[0]) for p in parts], np.int64)
    var_ptr = np.concatenate(([0], np.cumsum(var_pieces))).astype(np.int64)  # each variable's first piece
    var_segs = np.array([len(s) for s in segs_of], np.int64)
    if parts:
        starts_all = np.concatenate([p[0] for p in parts]).astype(np.int64, copy=False)
        stops_all = np.concatenate([p[1] for p in parts]).astype(np.int64, copy=False)
        tile = np.concatenate([p[2] for p in parts]).astype(np.int64, copy=False)
        itemsize = np.repeat(np.array([v.dtype.itemsize for v in owners], np.int64), var_pieces)
        nbytes = (stops_all - starts_all) * itemsize
        del starts_all, stops_all, itemsize
        counts = np.repeat(var_segs, var_pieces)
        if var_segs.max() == 1:  # one segment each (no function called twice): repeated per piece
            first_seg = np.concatenate(segs_of)
            seg_start = np.repeat(first_seg[:, 0], var_pieces)
            seg_end = np.repeat(first_seg[:, 1], var_pieces)
        else:  # each piece's segments are its variable's
            seg_start = np.concatenate([np.tile(s[:, 0], k) for s, k in zip(segs_of, var_pieces)])
            seg_end = np.concatenate([np.tile(s[:, 1], k) for s, k in zip(segs_of, var_pieces)])
    else:
        tile = nbytes = counts = seg_start = seg_end = np.zeros(0, np.int64)
    seg_ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    local, peak = place_pieces(tile, nbytes, seg_start, seg_end, target, seg_ptr)
    tile_bytes = align(peak, target.alignment)
    tile_base = np.concatenate(([0], np.cumsum(tile_bytes)[:-1])).astype(np.int64)
    total = int(tile_bytes.sum())

    addr = tile_base[tile] + local
    for i, v in enumerate(owners):
        a, b = var_ptr[i], var_ptr[i + 1]
        layouts[v.id] = Layout(v, parts[i][0], parts[i][1], tile[a:b], addr[a:b])

    n = target.num_tiles
    cats = {c: np.zeros(n, np.int64) for c in CATEGORIES}
    size = align(nbytes, target.alignment)
    code = {VARIABLE: 0, CONSTANT: 1, TEMPORARY: 2}
    cat_of = np.repeat(np.array([code[v.category] for v in owners], np.int64), var_pieces)
    if tile.size:
        cats["variables"] += np.bincount(tile[cat_of == 0], weights=size[cat_of == 0], minlength=n).astype(np.int64)
        cats["constants"] += np.bincount(tile[cat_of == 1], weights=size[cat_of == 1], minlength=n).astype(np.int64)
        fixed = cats["variables"] + cats["constants"]
        cats["temporaries"] = np.maximum(tile_bytes - fixed, 0)
    cats["stack"][:] = target.stack_bytes_per_tile

    # liveness over the timeline: not-always-live bytes (summed over tiles) at each position; the
    # pieces of a variable share its segments, so each variable adds its bytes once per segment
    length = max(1, max((sg[-1][1] for sg in segments.values() if sg), default=0) + 1)
    diff = np.zeros(length + 1, np.int64)
    if tile.size:
        per_var = np.add.reduceat(size, var_ptr[:-1])
        for i, v in enumerate(owners):
            if v.category != TEMPORARY:
                continue
            first = var_ptr[i]
            own = slice(seg_ptr[first], seg_ptr[first + 1])  # the variable's segments
            np.add.at(diff, np.clip(seg_start[own], 0, length), per_var[i])
            np.add.at(diff, np.clip(seg_end[own] + 1, 0, length), -per_var[i])
    liveness = np.cumsum(diff)[:length]
    return layouts, MemoryPlan(target, tile_bytes, tile_base, total, cats), liveness, cats["temporaries"].copy()


# ------------------------------------------------------------------------------------------------
# 3. steps


class Compiler:
    """Turns program nodes into steps (see the module docstring for what program kinds may use)."""

    def __init__(self, graph: Graph, layouts: dict, plan: MemoryPlan):
        self.graph = graph
        self.target = graph.target
        self.layouts = layouts
        self.plan = plan
        self._steps: list[Step] = []
        self._cache: dict = {}
        self._functions: dict[int, int] = {}
        self.function_nodes: list = []
        n = self.target.num_tiles
        self._code_on_tile: dict = {}  # (codelet, types) -> bool[tiles]: its code is on the tile
        self.code_bytes = np.zeros(n, np.int64)
        self.state_bytes = np.zeros(n, np.int64)
        self.exchange_bytes = np.zeros(n, np.int64)
        self.owners: dict = {}  # category -> [(owner name, tiles, bytes)] for out-of-memory reports
        self.control_bytes = np.zeros(n, np.int64)
        self._control_all = 0  # control code every tile holds (kept apart: no per-tile array per step)
        self._control_owners: list = []  # (owner name, tiles or None for every tile, bytes per tile)

    # -- the API of program kinds
    @property
    def steps(self) -> list:
        """The steps so far, in id order (read only: add steps with add_step)."""
        return self._steps

    def add_step(self, kind: str, name: str, cycles: int, tile_cycles=None, *, payload=None, vertices: int = 0,
                 bytes_moved: int = 0, debug: str = "", tiles=None) -> Step:
        """Append a step of step kind `kind` and return it. Its control code (CONTROL_CODE) goes on
        `tiles` (the tiles a compute set has vertices on; by default those with cycles in an
        exchange, every tile otherwise)."""
        sk = step_kind(kind)
        s = Step(len(self._steps), kind, name, cycles, tile_cycles, payload, vertices, bytes_moved, debug,
                 sk.profile_class)
        self._steps.append(s)
        if kind == "sync":
            self._control(name, None, CONTROL_CODE["sync"])
        elif kind == "compute":
            self._control(name, tiles, CONTROL_CODE["compute"])
        elif kind == "exchange":
            if tiles is None and tile_cycles is not None:
                tiles = np.flatnonzero(np.asarray(tile_cycles))
            if tiles is not None:
                self._control(name, tiles, CONTROL_CODE["exchange"])
        else:
            self._control(name, None, CONTROL_CODE["step"])
        return s

    def _control(self, owner: str, tiles, nbytes: int) -> None:
        """Control code of one step: `nbytes` on each of `tiles` (None: every tile)."""
        if tiles is None:
            self._control_all += nbytes
        else:
            tiles = _sorted_unique(np.asarray(tiles, np.int64))
            if tiles.size == 0:
                return
            self.control_bytes[tiles] += nbytes
        self._control_owners.append((owner, None if tiles is None else tiles.astype(np.int32), nbytes))

    def control_code(self) -> np.ndarray:
        """Control code bytes on every tile."""
        return self.control_bytes + self._control_all

    def sync(self, why: str = "") -> StepRef:
        """A sync step across the replica's tiles (before an exchange or transfer); its node."""
        c = costs.sync_cycles(self.target)
        return StepRef(self.add_step("sync", f"sync ({why})" if why else "sync", c).id)

    def node(self, p: Program):
        """The compiled node of a program (control nodes here, leaves through their program kind)."""
        match p:
            case Sequence(programs=programs):
                return Seq(tuple(self.node(q) for q in programs))
            case Repeat(count=count, body=body):
                if int(count) < 0:
                    raise CompileError(f"Repeat count must be >= 0, got {count}")
                self._control(p.name or "repeat", None, CONTROL_CODE["step"])
                return Loop(int(count), self.node(body))
            case If(condition=condition, then_=then, else_=otherwise):
                ref = self.scalar_ref(condition, "If condition")
                b = self.add_step("branch", p.name or "if", costs.branch_cycles(self.target))
                return Branch(b.id, ref, self.node(then), self.node(otherwise) if otherwise is not None else Seq())
            case Switch(control=control, cases=cases, default=default):
                ref = self.scalar_ref(control, "Switch control")
                b = self.add_step("branch", p.name or "switch", costs.branch_cycles(self.target))
                arms = {int(k): self.node(v) for k, v in cases.items()}
                return MultiBranch(b.id, ref, tuple(arms.items()), self.node(default) if default is not None else Seq())
            case Call(function=function):
                self._control(f"call {function.name}", None, CONTROL_CODE["step"])
                return CallRef(self._function(function))
        return self._leaf(p)

    def _leaf(self, p: Program):
        """A leaf through its program kind: it stands for one timeline position, its last step."""
        first = len(self._steps)
        compile_progress.tick()
        out = program_kind_of(p).compile(self, p)
        for s in self._steps[first:-1]:
            s.in_timeline = False
        return out

    def addresses(self, t: Tensor, what: str):
        """(byte addresses, tiles) of every element of `t`, in row-major order."""
        L = self.layouts.get(t.variable.id)
        if L is None:
            raise CompileError(f"{what}: tensor {t.name!r} has no memory (is it empty?)")
        return L.element_addresses(t.flat_index())

    def address_runs(self, t: Tensor, what: str):
        """(byte addresses, tiles, element counts) of the stretches of `t` that are consecutive in
        one piece, in row-major order (`Layout.run_addresses`): per run, not per element."""
        L = self.layouts.get(t.variable.id)
        if L is None:
            raise CompileError(f"{what}: tensor {t.name!r} has no memory (is it empty?)")
        return L.run_addresses(*t.index_runs())

    def scalar_ref(self, t: Tensor, what: str) -> ScalarRef:
        """Where the engine reads a one-element tensor: its storage dtype and element index."""
        if t.numel != 1:
            raise CompileError(f"{what} must be a tensor of one element, {t.name!r} has shape {t.shape}")
        L = self.layouts[t.variable.id]
        addr, _ = L.element_addresses(t.flat_index())
        dt = t.dtype
        return ScalarRef(dt.storage, int(addr[0]) // dt.itemsize)

    def cached(self, key, build):
        """build() once per key in this compilation (e.g. a compute set executed several times)."""
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    def add_vertex_memory(self, tiles: np.ndarray, code_key, code_bytes: int, state_bytes,
                          owner: str = "") -> None:
        """Vertex state for every vertex on `tiles` (`state_bytes`: one figure for all, or one per
        vertex); the code of `code_key` once per tile using it. `owner` (the compute set's name) is
        what an out-of-memory report names."""
        n = self.target.num_tiles
        if np.ndim(state_bytes):
            state = np.bincount(tiles, weights=state_bytes, minlength=n).astype(np.int64)
        else:
            state = np.bincount(tiles, minlength=n) * int(state_bytes)
        self.state_bytes += state
        self._owned("vertex_state", owner, state)
        on = self._code_on_tile.get(code_key)
        if on is None:
            on = self._code_on_tile[code_key] = np.zeros(n, bool)
        used = _sorted_unique(np.asarray(tiles, np.int64))
        new = used[~on[used]]
        on[new] = True
        self.code_bytes[new] += code_bytes

    def add_exchange_code(self, tile_bytes: np.ndarray, owner: str = "") -> None:
        """Exchange code bytes on every tile; `owner` (the exchange's name) for out-of-memory reports."""
        self.exchange_bytes += tile_bytes
        self._owned("exchange_code", owner, tile_bytes)

    def _owned(self, category: str, owner: str, tile_bytes: np.ndarray) -> None:
        nz = np.flatnonzero(tile_bytes)
        if nz.size:  # sparse: (owner, tiles, bytes) per step
            self.owners.setdefault(category, []).append((owner, nz.astype(np.int32), tile_bytes[nz].astype(np.int64)))

    def owners_on_tile(self, t: int, layouts: dict, top: int | None = 4) -> dict:
        """{category: [(owner name, bytes), ...]} of what fills tile t, largest first (the `top` of
        each, or all): tensors (named by the op that made them) for data, steps for exchange code,
        vertex state and control code."""
        by: dict = {}
        for L in layouts.values():
            m = L.tiles == t
            if m.any():
                v = L.variable
                cat = {VARIABLE: "variables", CONSTANT: "constants"}.get(v.category, "temporaries")
                name = v.debug or v.name
                b = int(((L.stops[m] - L.starts[m]) * v.dtype.itemsize).sum())
                by.setdefault(cat, {})[name] = by.setdefault(cat, {}).get(name, 0) + b
        for cat, items in self.owners.items():
            for owner, tiles, nbytes in items:
                k = np.searchsorted(tiles, t)
                if k < tiles.size and tiles[k] == t:
                    by.setdefault(cat, {})[owner] = by.setdefault(cat, {}).get(owner, 0) + int(nbytes[k])
        ctl = by.setdefault("control_code", {})
        for owner, tiles, nbytes in self._control_owners:
            if tiles is None or (tiles.size and tiles[min(np.searchsorted(tiles, t), tiles.size - 1)] == t):
                ctl[owner] = ctl.get(owner, 0) + nbytes
        return {c: sorted(d.items(), key=lambda x: -x[1])[:top] for c, d in by.items() if d}

    # -- functions
    def _function(self, f: Function) -> int:
        key = id(f)
        if key not in self._functions:
            self._functions[key] = len(self.function_nodes)
            self.function_nodes.append(None)
            self.function_nodes[self._functions[key]] = self.node(f.program)
        return self._functions[key]


def _sorted_unique(tiles: np.ndarray) -> np.ndarray:
    """np.unique(tiles), without its sort when they are already strictly increasing (the tiles of
    an exchange's cycles or of a compute set mostly are)."""
    if tiles.ndim == 1 and (tiles.size < 2 or bool((tiles[1:] > tiles[:-1]).all())):
        return tiles
    return np.unique(tiles)


RELEASE_AFTER_BYTES = 1 << 28  # simulated memory from which a compile gives its freed heap back (hostmem.py)


def compile(graph: Graph, programs) -> Executable:  # noqa: A001 - the natural name
    """Compile `programs` (one Program or a list; run them by index) for the graph's target."""
    if isinstance(programs, Program):
        programs = [programs]
    programs = list(programs)
    for p in programs:
        if not isinstance(p, Program):
            raise TypeError(f"compile takes ipu programs, got {type(p).__name__}")
    compile_ahead.start(graph)  # kernels not cached yet: a worker compiles them meanwhile
    with compile_progress.program():  # (joins a Session's: its phases go on the same line)
        exe = _compile(graph, programs)
    if exe.total_bytes >= RELEASE_AFTER_BYTES:  # a large program's freed working arrays: not part of its footprint
        hostmem.release_freed()
    return exe


def _compile(graph: Graph, programs: list) -> Executable:
    target = graph.target
    compile_progress.phase("planning memory")
    tl = Timeline()
    for p in programs:
        tl.walk(p)
    segments = tl.segments()
    layouts, plan, liveness, live_peak = _plan_memory(graph, tl.vars, segments, target)
    compile_progress.phase("building exchange and compute tables")
    comp = Compiler(graph, layouts, plan)
    nodes = [comp.node(p) for p in programs]
    compile_progress.phase("checking memory")
    plan.categories["vertex_code"] = comp.code_bytes
    plan.categories["vertex_state"] = comp.state_bytes
    plan.categories["exchange_code"] = comp.exchange_bytes
    plan.categories["control_code"] = comp.control_code()
    # code loaded from streaming memory (ipu/codeload.py): vertex code of functions that CodeLoad
    # targets is live only from a load to the last call before the next load
    code = codeload.analyse(programs, comp, tl.pos)
    if code is not None:
        plan.categories["vertex_code"] = code.resident
        plan.categories["code_loaded"] = code.loaded_peak
        n = max(len(liveness), len(code.live))
        liveness = np.pad(liveness, (0, n - len(liveness))) + np.pad(code.live, (0, n - len(code.live)))
        live_peak = live_peak + code.loaded_peak

    check_fits(plan, lambda t: comp.owners_on_tile(t, layouts, top=None))
    for v in graph.variables:  # mappings are fixed now: keep them as pieces, not per element
        v.compact()
    exe = Executable(target, comp.steps, nodes, comp.function_nodes, layouts,
                     {v.id: v for v in graph.variables}, dict(graph.streams), plan,
                     len(liveness), liveness, live_peak,
                     remote_buffers=dict(graph.remote_buffers), code_liveness=code)
    # exchanges the compiled step loop may feed into the next compute set (ipu/forwarding.py)
    temporaries = {vid for vid, v in tl.vars.items() if v.category == TEMPORARY}
    steps_at = timeline_steps(exe)
    unwritten: tuple[list, list] = ([np.zeros(0, np.int64)], [np.zeros(0, np.int64)])
    for vid in tl.unwritten_first(temporaries):  # they may read what their bytes held: where?
        L = layouts.get(vid)
        if L is None:
            continue
        a = L.addr.astype(np.int64)
        b = a + (L.stops - L.starts).astype(np.int64) * L.variable.dtype.itemsize
        at = tl.uses[vid][0][0]
        first = exe.steps[steps_at[at]] if steps_at is not None and at < len(steps_at) else None
        if first is not None and isinstance(first.payload, compute.Vertices):
            a, b = forwarding.stale_reads(first.payload.groups, a, b)  # the bytes its first step may read
        unwritten[0].append(a)
        unwritten[1].append(b)
    exe.forwarding = forwarding.Forwarding(
        forwarding.exchange_readers(tl.uses, segments, steps_at, exe.steps, temporaries),
        np.concatenate(unwritten[0]), np.concatenate(unwritten[1]))
    return exe
