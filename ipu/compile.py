"""Compile a graph and its programs into an Executable.

1. Walk the program trees in execution order (calls expanded) to get the timeline: when each
   variable is first and last used, and which stretches are loops.
2. Plan memory: an address for every piece of every used variable on its tile (`ipu.memory`).
3. Turn every leaf into a step with precomputed tables: vertex tables per compute set (grouped by
   codelet and field types), copy tables for exchanges and host streams, the address of every
   branch condition. Each step carries its cycles on every tile from the cost models.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from . import codeload, costs, remote
from .errors import CompileError, MappingError
from . import collectives  # noqa: E402  (CrossReplica: collectives between replicas)
from .graph import ComputeSet, Function, Graph
from .timeline import Timeline
from .memory import CATEGORIES, MemoryPlan, align, check_fits, place_pieces
from .program import (Call, Copy, DeviceToHost, Execute, HostToDevice, If, Program, Repeat,
                      Sequence, Switch, Sync)
from .target import Target
from .tensor import CONSTANT, TEMPORARY, VARIABLE, Tensor, Variable

# Non-data memory per tile (assumptions in the spirit of Poplar's code generation; each is a
# documented constant, not a measurement):
CONTROL_BYTES_PER_STEP = 8  # one supervisor instruction pair per program step, on every tile

_FOREVER = np.iinfo(np.int64).max // 4


@dataclass
class Layout:
    """Where a variable's pieces live: flat element runs, their tiles and global byte addresses."""

    variable: Variable
    starts: np.ndarray
    stops: np.ndarray
    tiles: np.ndarray
    addr: np.ndarray  # byte offset of each piece in the flat memory of a replica

    def element_addresses(self, idx: np.ndarray):
        """(byte addresses, tiles) of flat element indices (one compiled pass: consecutive indices
        mostly stay in the same piece, so the piece is searched for only when it changes)."""
        idx = np.ascontiguousarray(np.asarray(idx, np.int64).reshape(-1))
        out_addr = np.empty(idx.size, np.int64)
        out_tile = np.empty(idx.size, np.int64)
        if idx.size:
            _lookup_addresses(idx, self.starts, self.stops, self.addr, self.tiles.astype(np.int64),
                              self.variable.dtype.itemsize, out_addr, out_tile)
        return out_addr, out_tile


@njit(cache=True)
def _lookup_addresses(idx, starts, stops, addr, tiles, isz, out_addr, out_tile):
    p = 0
    n = starts.shape[0]
    for i in range(idx.shape[0]):
        e = idx[i]
        if e < starts[p] or e >= stops[p]:
            lo = 0
            hi = n - 1
            while lo < hi:  # the last piece starting at or before e
                mid = (lo + hi + 1) >> 1
                if starts[mid] <= e:
                    lo = mid
                else:
                    hi = mid - 1
            p = lo
        out_addr[i] = addr[p] + (e - starts[p]) * isz
        out_tile[i] = tiles[p]


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


@dataclass
class Step:
    """One leaf of the program: what the engine runs and what the profile shows."""

    id: int
    kind: str  # compute | exchange | sync | host_to_device | device_to_host | branch
    name: str
    cycles: int  # the step's cost: the slowest tile (plus any global term)
    tile_cycles: np.ndarray | None = None  # int64[num_tiles], or None when every tile is idle
    # payload by kind
    groups: list = field(default_factory=list)  # compute
    copy: tuple | None = None  # exchange / host: (src_off, dst_off, nbytes) arrays, staged flag
    stream: object = None
    vertices: int = 0
    bytes_moved: int = 0
    debug: str = ""
    remote: object = None  # remote_load / remote_store: remote.RemoteTransfer; code_load: remote.CodeLoadInfo
    parts: list | None = None  # a merged transfer (MultiExchange): the steps it runs in one phase
    collective: object = None  # the last step of a CrossReplica: collectives.Payload the engine runs


@dataclass
class Executable:
    target: Target
    steps: list
    programs: list  # node trees, one per program given to compile()
    functions: list  # node trees of shared functions
    layouts: dict  # variable id -> Layout
    variables: dict  # variable id -> Variable
    streams: dict
    plan: MemoryPlan
    timeline_length: int
    liveness: np.ndarray  # not-always-live bytes (summed over tiles) at each timeline position
    live_peak_tile: np.ndarray  # per tile: the most not-always-live bytes at any position
    remote_buffers: dict = field(default_factory=dict)  # name -> remote.RemoteBuffer (streaming memory)
    code_liveness: object = None  # codeload.CodeLiveness: resident / loaded code per tile and position

    @property
    def total_bytes(self) -> int:
        return self.plan.total_bytes

    def variable(self, name: str) -> Variable:
        for v in self.variables.values():
            if v.name == name:
                return v
        raise KeyError(name)


# ------------------------------------------------------------------------------------------------
# 2. memory


def _plan_memory(graph: Graph, used: dict, segments: dict, target: Target):
    pieces_tile, pieces_bytes, pieces_owner, seg_counts, seg_s, seg_e = [], [], [], [], [], []
    live_vars = [v for v in graph.variables if v.category != TEMPORARY or v.id in used]
    for v in live_vars:
        if v.numel == 0:
            continue
        unmapped = np.count_nonzero(v.tile_of < 0)
        if unmapped:
            raise MappingError(
                f"tensor {v.name!r} has {unmapped} of {v.numel} elements without a tile mapping; "
                f"call set_tile_mapping or map_linearly on it before compiling"
            )
        starts, stops, tiles = v.pieces()
        always = v.category != TEMPORARY
        # every piece of a temporary is live in the variable's segments (ipu/timeline.py)
        segs = np.array([(-1, _FOREVER)] if always else segments[v.id], np.int64).reshape(-1, 2)
        pieces_tile.append(tiles.astype(np.int64))
        pieces_bytes.append((stops - starts) * v.dtype.itemsize)
        seg_counts.append(np.full(len(starts), len(segs), np.int64))
        seg_s.append(np.tile(segs[:, 0], len(starts)))
        seg_e.append(np.tile(segs[:, 1], len(starts)))
        pieces_owner.append((v, starts, stops, tiles))
    if pieces_tile:
        tile = np.concatenate(pieces_tile)
        nbytes = np.concatenate(pieces_bytes)
        counts = np.concatenate(seg_counts)
        seg_start = np.concatenate(seg_s)
        seg_end = np.concatenate(seg_e)
    else:
        tile = nbytes = counts = seg_start = seg_end = np.zeros(0, np.int64)
    seg_ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    start = seg_start[seg_ptr[:-1]]
    local, peak = place_pieces(tile, nbytes, seg_start, seg_end, target, seg_ptr)
    tile_bytes = align(peak, target.alignment)
    tile_base = np.concatenate(([0], np.cumsum(tile_bytes)[:-1])).astype(np.int64)
    total = int(tile_bytes.sum())

    layouts = {}
    k = 0
    for v, starts, stops, tiles in pieces_owner:
        n = len(starts)
        addr = tile_base[tiles.astype(np.int64)] + local[k:k + n]
        layouts[v.id] = Layout(v, starts, stops, tiles.astype(np.int64), addr)
        k += n

    n = target.num_tiles
    cats = {c: np.zeros(n, np.int64) for c in CATEGORIES}
    size = align(nbytes, target.alignment)
    always = start < 0
    cat_of = np.array([{VARIABLE: 0, CONSTANT: 1, TEMPORARY: 2}[v.category]
                       for v, s, _, _ in pieces_owner for _ in range(len(s))], dtype=np.int64)
    if tile.size:
        cats["variables"] += np.bincount(tile[cat_of == 0], weights=size[cat_of == 0], minlength=n).astype(np.int64)
        cats["constants"] += np.bincount(tile[cat_of == 1], weights=size[cat_of == 1], minlength=n).astype(np.int64)
        fixed = cats["variables"] + cats["constants"]
        cats["temporaries"] = np.maximum(tile_bytes - fixed, 0)
    cats["stack"][:] = target.stack_bytes_per_tile

    # liveness over the timeline: not-always-live bytes (summed over tiles) at each position
    length = max(1, max((sg[-1][1] for sg in segments.values() if sg), default=0) + 1)
    diff = np.zeros(length + 1, np.int64)
    temp = np.repeat(~always, counts)
    if temp.any():
        seg_size = np.repeat(size, counts)[temp]
        np.add.at(diff, np.clip(seg_start[temp], 0, length), seg_size)
        np.add.at(diff, np.clip(seg_end[temp] + 1, 0, length), -seg_size)
    liveness = np.cumsum(diff)[:length]
    return layouts, MemoryPlan(target, tile_bytes, tile_base, total, cats), liveness, cats["temporaries"].copy()


# ------------------------------------------------------------------------------------------------
# 3. steps


class _Compiler:
    def __init__(self, graph: Graph, layouts: dict, plan: MemoryPlan):
        self.graph = graph
        self.target = graph.target
        self.layouts = layouts
        self.plan = plan
        self.steps: list[Step] = []
        self.cs_cache: dict[int, tuple] = {}
        self.functions: dict[int, int] = {}
        self.function_nodes: list = []
        self.code_keys = [set() for _ in range(self.target.num_tiles)]  # (codelet, types) per tile
        self.code_bytes = np.zeros(self.target.num_tiles, np.int64)
        self.state_bytes = np.zeros(self.target.num_tiles, np.int64)
        self.exchange_bytes = np.zeros(self.target.num_tiles, np.int64)
        self.control_steps = 0

    def _step(self, **kw) -> Step:
        s = Step(id=len(self.steps), **kw)
        self.steps.append(s)
        self.control_steps += 1
        return s

    def _sync(self, why: str):
        c = costs.sync_cycles(self.target)
        return ("step", self._step(kind="sync", name=f"sync ({why})" if why else "sync", cycles=c,
                                   tile_cycles=None).id)

    # -- program nodes
    def node(self, p: Program):
        if isinstance(p, Sequence):
            return ("seq", [self.node(q) for q in p.programs])
        if isinstance(p, Repeat):
            if int(p.count) < 0:
                raise CompileError(f"Repeat count must be >= 0, got {p.count}")
            self.control_steps += 1
            return ("repeat", int(p.count), self.node(p.body))
        if isinstance(p, If):
            ref = self._scalar_ref(p.condition, "If condition")
            b = self._step(kind="branch", name=p.name or "if", cycles=costs.branch_cycles(self.target))
            return ("if", b.id, ref, self.node(p.then_), self.node(p.else_) if p.else_ is not None else ("seq", []))
        if isinstance(p, Switch):
            ref = self._scalar_ref(p.control, "Switch control")
            b = self._step(kind="branch", name=p.name or "switch", cycles=costs.branch_cycles(self.target))
            cases = {int(k): self.node(v) for k, v in p.cases.items()}
            default = self.node(p.default) if p.default is not None else ("seq", [])
            return ("switch", b.id, ref, cases, default)
        if isinstance(p, Call):
            return ("call", self._function(p.function))
        if isinstance(p, Execute):
            return ("step", self._execute(p).id)
        if isinstance(p, Copy):
            return ("seq", [self._sync(p.name or "copy"), ("step", self._copy(p).id)])
        if isinstance(p, (HostToDevice, DeviceToHost)):
            return ("seq", [self._sync(p.name or "stream"), ("step", self._stream(p).id)])
        if isinstance(p, Sync):
            return ("step", self._step(kind="sync", name=p.name or "sync", cycles=costs.sync_cycles(self.target)).id)
        if isinstance(p, collectives.CrossReplica):  # between replicas (ipu/collectives.py)
            return collectives.compile_node(self, p)
        if isinstance(p, remote.TRANSFER_NODES):  # streaming memory and code loads (ipu/remote.py)
            return remote.compile_node(self, p)
        raise CompileError(f"unknown program node {type(p).__name__}")

    def _function(self, f: Function) -> int:
        key = id(f)
        if key not in self.functions:
            self.functions[key] = len(self.function_nodes)
            self.function_nodes.append(None)
            self.function_nodes[self.functions[key]] = self.node(f.program)
        return self.functions[key]

    def _scalar_ref(self, t: Tensor, what: str):
        if t.numel != 1:
            raise CompileError(f"{what} must be a tensor of one element, {t.name!r} has shape {t.shape}")
        L = self.layouts[t.variable.id]
        addr, _ = L.element_addresses(t.flat_index())
        dt = t.dtype
        return (dt.storage, int(addr[0]) // dt.itemsize)

    # -- compute sets
    def _execute(self, p: Execute) -> Step:
        cs: ComputeSet = p.compute_set
        if not isinstance(cs, ComputeSet):
            raise CompileError("Execute takes a ComputeSet")
        if id(cs) not in self.cs_cache:
            self.cs_cache[id(cs)] = self._compile_compute_set(cs)
        groups, tile_cycles, nverts = self.cs_cache[id(cs)]
        cycles = int(tile_cycles.max(initial=0))
        return self._step(kind="compute", name=p.name or cs.name, cycles=cycles, tile_cycles=tile_cycles,
                          groups=groups, vertices=nverts, debug=cs.debug)

    def _compile_compute_set(self, cs: ComputeSet):
        by_key: dict = {}
        for chunk in cs.chunks:
            c = chunk.codelet
            n = len(chunk.tiles)
            off = np.zeros((n, len(c.fields)), np.int64)
            for j, var in enumerate(chunk.field_vars):
                off[:, j] = self._field_offsets(cs, chunk, j, var)
            by_key.setdefault((c.name, chunk.types), []).append((chunk, off))
        groups = []
        all_tiles, all_cycles, all_sup = [], [], []
        for (name, types), items in by_key.items():
            c = items[0][0].codelet
            tiles = np.concatenate([ch.tiles for ch, _ in items])
            off = np.concatenate([o for _, o in items])
            cnt = np.concatenate([ch.field_count for ch, _ in items])
            fp = np.concatenate([ch.fp for ch, _ in items])
            ip = np.concatenate([ch.ip for ch, _ in items])
            vc = np.asarray(c.cycles(types, cnt, fp, ip, self.target), np.int64).reshape(-1)
            if vc.shape[0] != tiles.shape[0]:
                raise CompileError(f"codelet {name}: cost model returned {vc.shape[0]} values for {tiles.shape[0]} vertices")
            groups.append(KernelGroup(c, types, tiles, np.ascontiguousarray(off), np.ascontiguousarray(cnt),
                                      np.ascontiguousarray(fp), np.ascontiguousarray(ip), vc))
            all_tiles.append(tiles)
            all_cycles.append(vc)
            all_sup.append(np.full(len(tiles), c.supervisor))
            # memory: vertex state per vertex, code once per (codelet, types) per tile
            self.state_bytes += np.bincount(tiles, minlength=self.target.num_tiles) * c.state_bytes()
            code = c.code_bytes(types)
            for t in np.unique(tiles):
                if (name, types) not in self.code_keys[t]:
                    self.code_keys[t].add((name, types))
                    self.code_bytes[t] += code
        if all_tiles:
            tile_cycles = costs.compute_set_tile_cycles(np.concatenate(all_tiles), np.concatenate(all_cycles),
                                                        np.concatenate(all_sup), self.target)
        else:
            tile_cycles = np.zeros(self.target.num_tiles, np.int64)
        return groups, tile_cycles, cs.num_vertices

    def _field_offsets(self, cs, chunk, j, var) -> np.ndarray:
        L = self.layouts[var.id]
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

    # -- copies
    def _addresses(self, t: Tensor, what: str):
        L = self.layouts.get(t.variable.id)
        if L is None:
            raise CompileError(f"{what}: tensor {t.name!r} has no memory (is it empty?)")
        return L.element_addresses(t.flat_index())

    def _copy(self, p: Copy) -> Step:
        src, dst = p.src, p.dst
        if src.numel != dst.numel:
            raise CompileError(f"Copy {p.name!r}: {src.name!r} has {src.numel} elements but {dst.name!r} has {dst.numel}")
        if src.dtype != dst.dtype:
            raise CompileError(f"Copy {p.name!r}: {src.name!r} is {src.dtype.name} but {dst.name!r} is {dst.dtype.name}; cast with a compute set")
        if src.numel == 0:
            return self._step(kind="exchange", name=p.name or "copy", cycles=0)
        isz = src.dtype.itemsize
        sa, st = self._addresses(src, "Copy source")
        da, dt = self._addresses(dst, "Copy destination")
        src_off, dst_off, nbytes, src_tile, dst_tile = _runs(sa, da, st, dt, isz)
        tile_cycles, extra = costs.exchange_tile_cycles(src_tile, dst_tile, src_off, nbytes, self.target)
        # exchange code from the phase's messages: sends, receive regions, phase entry (costs.py)
        self.exchange_bytes += costs.exchange_code_bytes(src_tile, dst_tile, src_off, dst_off, nbytes,
                                                         self.target.num_tiles)
        staged = src.variable is dst.variable
        return self._step(kind="exchange", name=p.name or f"copy {src.name} -> {dst.name}",
                          cycles=int(tile_cycles.max(initial=0)) + extra, tile_cycles=tile_cycles,
                          copy=(src_off, dst_off, nbytes, staged), bytes_moved=int(nbytes.sum()))

    def _stream(self, p) -> Step:
        to_dev = isinstance(p, HostToDevice)
        t = p.dst if to_dev else p.src
        s = p.stream
        if s.to_device != to_dev:
            raise CompileError(f"stream {s.name!r} goes the other way")
        if t.numel != s.numel or t.dtype != s.dtype:
            raise CompileError(
                f"stream {s.name!r} carries {s.dtype.name}{list(s.shape)} but tensor {t.name!r} is "
                f"{t.dtype.name}{list(t.shape)}"
            )
        isz = t.dtype.itemsize
        addr, tiles = self._addresses(t, f"stream {s.name!r}")
        host = np.arange(t.numel, dtype=np.int64) * isz
        if to_dev:
            src_off, dst_off, nbytes, _, run_tiles = _runs(host, addr, np.zeros_like(tiles), tiles, isz)
        else:
            src_off, dst_off, nbytes, run_tiles, _ = _runs(addr, host, tiles, np.zeros_like(tiles), isz)
        tile_cycles, cycles = costs.host_transfer_tile_cycles(run_tiles, nbytes, self.target)
        if s.nbytes > self.target.max_transfer_bytes:
            raise CompileError(
                f"stream {s.name!r} moves {s.nbytes:,} bytes in one transfer; the limit is "
                f"{self.target.max_transfer_bytes:,} (128 MiB): split it into smaller tensors"
            )
        kind = "host_to_device" if to_dev else "device_to_host"
        return self._step(kind=kind, name=p.name or f"{kind} {s.name}", cycles=cycles, tile_cycles=tile_cycles,
                          copy=(src_off, dst_off, nbytes, False), stream=s, bytes_moved=s.nbytes)


def _runs(sa, da, st, dt, isz):
    """Group an element-wise copy into runs that are contiguous at both ends on fixed tiles:
    (source offsets, destination offsets, bytes, source tiles, destination tiles)."""
    args = [np.ascontiguousarray(np.asarray(a, np.int64)) for a in (sa, da, st, dt)]
    return _runs_kernel(*args, isz)


@njit(cache=True)
def _runs_kernel(sa, da, st, dt, isz):
    n = sa.shape[0]
    count = 0
    for i in range(n):
        if i == 0 or sa[i] != sa[i - 1] + isz or da[i] != da[i - 1] + isz or st[i] != st[i - 1] \
                or dt[i] != dt[i - 1]:
            count += 1
    so = np.empty(count, np.int64)
    do = np.empty(count, np.int64)
    nb = np.empty(count, np.int64)
    ts = np.empty(count, np.int64)
    td = np.empty(count, np.int64)
    r = -1
    for i in range(n):
        if i == 0 or sa[i] != sa[i - 1] + isz or da[i] != da[i - 1] + isz or st[i] != st[i - 1] \
                or dt[i] != dt[i - 1]:
            r += 1
            so[r] = sa[i]
            do[r] = da[i]
            nb[r] = 0
            ts[r] = st[i]
            td[r] = dt[i]
        nb[r] += isz
    return so, do, nb, ts, td


def compile(graph: Graph, programs) -> Executable:  # noqa: A001 - the natural name
    """Compile `programs` (one Program or a list; run them by index) for the graph's target."""
    if isinstance(programs, Program):
        programs = [programs]
    programs = list(programs)
    for p in programs:
        if not isinstance(p, Program):
            raise TypeError(f"compile takes ipu programs, got {type(p).__name__}")
    target = graph.target
    tl = Timeline()
    for p in programs:
        tl.walk(p)
    layouts, plan, liveness, live_peak = _plan_memory(graph, tl.vars, tl.segments(), target)
    comp = _Compiler(graph, layouts, plan)
    nodes = [comp.node(p) for p in programs]
    plan.categories["vertex_code"] = comp.code_bytes
    plan.categories["vertex_state"] = comp.state_bytes
    plan.categories["exchange_code"] = comp.exchange_bytes
    plan.categories["control_code"] = np.full(target.num_tiles, comp.control_steps * CONTROL_BYTES_PER_STEP, np.int64)
    # code loaded from streaming memory (ipu/codeload.py): vertex code of functions that CodeLoad
    # targets is live only from a load to the last call before the next load
    code = codeload.analyse(programs, comp, tl.pos)
    if code is not None:
        plan.categories["vertex_code"] = code.resident
        plan.categories["code_loaded"] = code.loaded_peak
        n = max(len(liveness), len(code.live))
        liveness = np.pad(liveness, (0, n - len(liveness))) + np.pad(code.live, (0, n - len(code.live)))
        live_peak = live_peak + code.loaded_peak

    def largest_on_tile(t):
        items = []
        for L in layouts.values():
            m = L.tiles == t
            if m.any():
                items.append((L.variable.name, int(((L.stops[m] - L.starts[m]) * L.variable.dtype.itemsize).sum())))
        return sorted(items, key=lambda x: -x[1])[:3]

    check_fits(plan, largest_on_tile)
    return Executable(target, comp.steps, nodes, comp.function_nodes, layouts,
                      {v.id: v for v in graph.variables}, dict(graph.streams), plan,
                      len(liveness), liveness, live_peak,
                      remote_buffers=dict(getattr(graph, "remote_buffers", {})), code_liveness=code)
