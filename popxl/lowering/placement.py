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


def tensor_ipu(t) -> int:
    """The IPU of a popxl tensor: its own, else that of its first consumer, else 0."""
    try:
        i = t._get_ipu_and_tile_set(False, False)[0]
    except Exception:  # noqa: BLE001 - an undefined placement means IPU 0
        i = None
    return int(i) if i is not None else 0


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

    def begin(self):
        return (len(self.g.variables), len(self.g.compute_sets))

    def end(self, mark, op) -> None:
        """Move what the op created since `mark` to the op's IPU."""
        if not self.active:
            return
        v0, c0 = mark
        i = 0 if op.type in SPANS_IPUS else self._check(op.ipu)
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
