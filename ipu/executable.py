"""What the compiler hands the engine: steps, program trees, the memory plan and layouts.

A `Step` is one leaf of a program as the engine runs it and the profile shows it. Its `payload`
is what the engine runs: one object of the payload type its program kind registered
(`ipu.kinds`), or None when only time passes (syncs, branches, the inner steps of a collective).
The program trees are `ipu.nodes` trees over the steps.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from . import interpreted
from .memory import MemoryPlan
from .target import Target
from .tensor import Variable

__all__ = ["Executable", "Layout", "Step"]


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
            interpreted.call(_lookup_addresses, idx.size, idx, self.starts, self.stops, self.addr,
                             self.tiles.astype(np.int64), self.variable.dtype.itemsize, out_addr, out_tile)
        return out_addr, out_tile


    def run_addresses(self, starts: np.ndarray, lengths: np.ndarray):
        """(byte addresses, tiles, element counts) of runs of consecutive flat elements, each run
        split where it crosses from one piece into the next: one entry per (run, piece), however
        long the runs are."""
        starts = np.ascontiguousarray(starts, np.int64)
        lengths = np.ascontiguousarray(lengths, np.int64)
        return interpreted.call(_split_runs, starts.size + self.starts.size, starts, lengths, self.starts, self.stops,
                                self.addr, self.tiles.astype(np.int64), self.variable.dtype.itemsize)


@njit(cache=True)
def _piece_of(e, starts):
    lo = 0
    hi = starts.shape[0] - 1
    while lo < hi:  # the last piece starting at or before e
        mid = (lo + hi + 1) >> 1
        if starts[mid] <= e:
            lo = mid
        else:
            hi = mid - 1
    return lo


@njit(cache=True)
def _piece_near(e, starts, h):
    """_piece_of(e, starts), trying piece h and the one after it first (a copy's next run mostly
    starts in the piece where the last one ended, or the next)."""
    n = starts.shape[0]
    if 0 <= h < n and starts[h] <= e:
        if h + 1 == n or starts[h + 1] > e:
            return h
        if h + 2 == n or starts[h + 2] > e:
            return h + 1
    return _piece_of(e, starts)


@njit(cache=True)
def _split_runs(rs, rl, starts, stops, addr, tiles, isz):
    n = 0
    first = np.empty(rs.shape[0], np.int64)  # each run's first piece, searched for once
    p = 0
    for i in range(rs.shape[0]):  # count the (run, piece) parts
        e = rs[i]
        left = rl[i]
        p = _piece_near(e, starts, p - 1) if left > 0 else 0
        first[i] = p
        while left > 0:
            k = min(left, stops[p] - e)
            n += 1
            e += k
            left -= k
            p += 1
    out_a = np.empty(n, np.int64)
    out_t = np.empty(n, np.int64)
    out_n = np.empty(n, np.int64)
    j = 0
    for i in range(rs.shape[0]):
        e = rs[i]
        left = rl[i]
        p = first[i]
        while left > 0:
            k = min(left, stops[p] - e)
            out_a[j] = addr[p] + (e - starts[p]) * isz
            out_t[j] = tiles[p]
            out_n[j] = k
            j += 1
            e += k
            left -= k
            p += 1
    return out_a, out_t, out_n


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


_Z = np.zeros(0, np.int64)
interpreted.register(_split_runs, _Z, _Z, _Z, _Z, _Z, _Z, 4)
interpreted.register(_lookup_addresses, _Z, _Z, _Z, _Z, _Z, 4, _Z, _Z)


@dataclass
class Step:
    """One leaf of the program: what the engine runs and what the profile shows."""

    id: int
    kind: str  # its step kind (ipu.kinds.StepKind): compute, exchange, sync, branch, host_to_device, ...
    name: str
    cycles: int  # the step's cost: the slowest tile (plus any global term)
    tile_cycles: np.ndarray | None = None  # int64[num_tiles], or None when every tile is idle
    payload: object = None  # what the engine runs (see the module docstring)
    vertices: int = 0
    bytes_moved: int = 0
    debug: str = ""
    profile_class: str = ""  # the profile class of its step kind (compute, exchange, sync, host, ...)
    # whether it stands for a position of the liveness timeline: a leaf program node has one
    # position, its last step; the steps it adds before (the sync before a transfer, a
    # collective's earlier hops) take none
    in_timeline: bool = True


@dataclass
class Executable:
    target: Target
    steps: list
    programs: list  # ipu.nodes trees, one per program given to compile()
    functions: list  # ipu.nodes trees of shared functions
    layouts: dict  # variable id -> Layout
    variables: dict  # variable id -> Variable
    streams: dict
    plan: MemoryPlan
    timeline_length: int
    liveness: np.ndarray  # not-always-live bytes (summed over tiles) at each timeline position
    live_peak_tile: np.ndarray  # per tile: the most not-always-live bytes at any position
    remote_buffers: dict = field(default_factory=dict)  # name -> remote.RemoteBuffer (streaming memory)
    code_liveness: object = None  # codeload.CodeLiveness: resident / loaded code per tile and position
    native: object = None  # native.Plan: the compiled step tables, built by the first compiled run
    # forwarding.Forwarding: exchanges that feed the next compute set directly (ipu/forwarding.py)
    forwarding: object = None

    @property
    def total_bytes(self) -> int:
        return self.plan.total_bytes

    def variable(self, name: str) -> Variable:
        for v in self.variables.values():
            if v.name == name:
                return v
        raise KeyError(name)
