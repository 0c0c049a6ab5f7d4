"""Placing tensors and vertices on the IPUs of a multi-IPU replica (``popxl.ipu(n)``).

Rules see `ctx.target` as one IPU (`tiles_per_ipu` tiles), so every tile they pick from scratch
(mapping policy, matmul plans, column layouts) is a tile of "this IPU", numbered from 0. After
each op is lowered, what it created (variables, compute sets) is moved to the op's IPU: tile t
becomes ipu * tiles_per_ipu + t. Tiles already at or above tiles_per_ipu came from tensors that
were placed before (the op's inputs, which live on its IPU) and stay. Ops that span IPUs
(ipu_copy, all_reduce across IPUs) place what they create themselves (`place`).
With one IPU per replica nothing moves.
"""
from __future__ import annotations

import numpy as np

import ipu

# op types whose rules put their tensors on several IPUs themselves
SPANS_IPUS = {"ipu_copy", "all_reduce"}
# op types that only copy their inputs into and out of called graphs (Copy programs, which may
# cross IPUs): their inputs are read wherever they are
CALLS = {"call", "repeat", "conditional"}


def tensor_ipu(t, _seen=None) -> int:
    """The IPU of a popxl tensor: its own (the IPU of the op that made it), else the IPU where it is
    used: its first consumer's, looking through call / repeat / conditional ops into the called
    graph (a variable passed to a graph is used where the graph's ops use it) and taking the source
    of an ipu_copy; else 0."""
    i = _ipu_of(t, _seen or set())
    return int(i) if i is not None else 0


def _ipu_of(t, seen):
    if getattr(t, "_ipu", None) is not None:
        return t._ipu
    if id(t) in seen:
        return None
    seen.add(id(t))
    for op in t.consumers:
        i = _ipu_via(op, t, seen)
        if i is not None:
            return i
    return None


def _ipu_via(op, t, seen):
    a = op.attrs
    if op.type in ("call", "repeat"):
        for g_i, o_i in a["input_map"].items():
            if op.inputs[o_i] is t:
                i = _ipu_of(a["graph"].inputs[g_i], seen)
                if i is not None:
                    return i
        return op.ipu
    if op.type == "conditional":
        for g, m in ((a["then_branch"], a["then_input_map"]), (a["else_branch"], a["else_input_map"])):
            for g_i, o_i in m.items():
                if op.inputs[o_i] is t:
                    i = _ipu_of(g.inputs[g_i], seen)
                    if i is not None:
                        return i
        return op.ipu
    if op.type == "ipu_copy":
        return a["source"]
    if op.type == "all_reduce":
        return a["ipus"][op.inputs.index(t)] if t in op.inputs else op.ipu
    return op.ipu


class IpuPlacement:
    def __init__(self, graph: ipu.Graph, tiles_per_ipu: int, ipus: int):
        self.g = graph
        self.tpi = int(tiles_per_ipu)
        self.ipus = int(ipus)
        self.active = self.ipus > 1
        self._placed_vars: set = set()
        self._placed_cs: set = set()

    def _check(self, i: int) -> int:
        i = int(i or 0)
        if not 0 <= i < self.ipus:
            raise ValueError(f"IPU {i} does not exist: this program runs on {self.ipus} IPU(s) per replica")
        return i

    def _shift_var(self, v, i: int) -> None:
        if i:
            t = v.tile_of
            m = (t >= 0) & (t < self.tpi)
            t[m] += i * self.tpi
        self._placed_vars.add(id(v))

    def place(self, v, i: int) -> None:
        """Put a variable mapped on 'this IPU' (tiles < tiles_per_ipu) on IPU i."""
        if not self.active:
            return
        self._shift_var(v, self._check(i))

    def begin(self, op=None, ctx=None):
        """Start lowering `op`: inputs that live on another IPU than the op's (a called graph's
        output used on another IPU, say) are copied over the IPU-Links first, so the rule sees
        them on its IPU; end() restores their bindings."""
        rebound = []
        if self.active and op is not None and ctx is not None and op.type not in SPANS_IPUS | CALLS:
            i = self._check(op.ipu)
            lo, hi = i * self.tpi, (i + 1) * self.tpi
            seen = set()
            for k, t in enumerate(op.inputs):
                if k in op.modified or id(t) in seen or t not in ctx.values:
                    continue
                seen.add(id(t))
                x = ctx.values[t]
                tiles = x.variable.tile_of[x.flat_index()] if x.numel else np.zeros(0, np.int32)
                if tiles.size == 0 or ((tiles >= lo) & (tiles < hi)).all() or (tiles < 0).any():
                    continue
                v = ctx.g.add_variable(f"{t.id}/on_ipu{i}", x.shape, x.dtype, ipu.TEMPORARY, debug=ctx.name())
                v.tile_of[:] = (tiles % self.tpi + lo).astype(v.tile_of.dtype).reshape(-1)
                self._placed_vars.add(id(v))
                ctx.emit(ipu.Copy(x, v, name=f"{op.name}/{t.name} to ipu{i}"))
                rebound.append((ctx.values, t, x))
                ctx.values[t] = v
        return (len(self.g.variables), len(self.g.compute_sets), rebound, ctx)

    def end(self, mark, op) -> None:
        """Move what the op created since `mark` to the op's IPU."""
        if not self.active:
            return
        v0, c0, rebound, ctx = mark
        i = 0 if op.type in SPANS_IPUS else self._check(op.ipu)
        if ctx is not None and op.type in ("call", "repeat"):  # outputs on the IPU of the graph's outputs
            g = op.attrs["graph"]
            for k, t_out in enumerate(op.outputs):
                x = ctx.values.get(t_out)
                if x is not None and k < len(g.outputs) and id(x.variable) not in self._placed_vars:
                    self._shift_var(x.variable, self._check(tensor_ipu(g.outputs[k])))
        for v in self.g.variables[v0:]:
            if id(v) not in self._placed_vars:
                self._shift_var(v, i)
        for cs in self.g.compute_sets[c0:]:
            if id(cs) in self._placed_cs:
                continue
            self._placed_cs.add(id(cs))
            if i:
                for ch in cs.chunks:
                    m = ch.tiles < self.tpi
                    if m.any():
                        ch.tiles = np.where(m, ch.tiles + i * self.tpi, ch.tiles)
        for values, t, x in rebound:  # the inputs copied over by begin() are read from their own IPU again
            values[t] = x
