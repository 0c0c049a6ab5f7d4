"""Tensors of the tile-level graph: variables with storage, and views of them.

A `Variable` owns storage: its elements (in row-major order) are mapped to tiles, and the memory
planner gives every contiguous run of elements on a tile (a *piece*) an address in that tile's
memory. A `Tensor` is a view: a variable plus an array of flat element indices shaped like the
view. Slicing, reshaping and transposing a view only rearranges that index array (as Poplar's
tensor expressions do), so any view can be the source or destination of a Copy; vertex fields need
views whose elements sit at consecutive addresses of one tile.
"""
from __future__ import annotations

import itertools
from typing import Iterable

import numpy as np

from .types import ElementType, element_type

__all__ = ["CONSTANT", "TEMPORARY", "VARIABLE", "Tensor", "Variable"]

_ids = itertools.count()

# Categories of data in tile memory, as the memory report shows them.
VARIABLE = "variable"  # always live: weights and other persistent state
CONSTANT = "constant"  # always live, initialised from the executable
TEMPORARY = "temporary"  # live only between its first and last use (liveness analysis)


def _resolve_shape(numel: int, shape) -> tuple:
    """`shape` with a -1 resolved; ValueError if it does not hold `numel` elements."""
    shape = [int(d) for d in shape]
    if shape.count(-1) == 1:
        rest = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        shape[shape.index(-1)] = numel // rest if rest else 0
    if int(np.prod(shape, dtype=np.int64)) != numel:
        raise ValueError(f"cannot reshape {numel} elements into shape {tuple(shape)}")
    return tuple(shape)


class Tensor:
    """A view of a variable's elements with a shape."""

    __slots__ = ("variable", "_index", "shape")

    def __init__(self, variable: "Variable", index: np.ndarray | None, shape: tuple[int, ...]):
        self.variable = variable
        self._index = index  # None means the identity view of the whole variable
        self.shape = tuple(int(s) for s in shape)

    # -- basic properties -------------------------------------------------------------------
    @property
    def dtype(self) -> ElementType:
        return self.variable.dtype

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def name(self) -> str:
        return self.variable.name

    @property
    def is_identity(self) -> bool:
        return self._index is None

    def index(self) -> np.ndarray:
        """Flat element indices of the variable, shaped like this view. An identity view (no index
        array) covers all of its variable in flat order, possibly with another shape."""
        if self._index is None:
            return np.arange(self.variable.numel, dtype=np.int64).reshape(self.shape)
        return self._index

    def flat_index(self) -> np.ndarray:
        return self.index().reshape(-1)

    def contiguous_range(self) -> tuple[int, int] | None:
        """(start, count) if the view is a run of consecutive elements of its variable, else None."""
        if self._index is None:
            return 0, self.variable.numel
        flat = self._index.reshape(-1)
        if flat.size == 0:
            return 0, 0
        start = int(flat[0])
        if flat.size == 1 or np.array_equal(flat, np.arange(start, start + flat.size, dtype=np.int64)):
            return start, int(flat.size)
        return None

    # -- view operations (no data moves) ----------------------------------------------------
    def _view(self, index: np.ndarray) -> "Tensor":
        return Tensor(self.variable, index, index.shape)

    def __getitem__(self, key) -> "Tensor":
        return self._view(self.index()[key])

    def reshape(self, *shape) -> "Tensor":
        if len(shape) == 1 and isinstance(shape[0], Iterable):
            shape = tuple(shape[0])
        if self._index is None:
            # a reshape keeps the flat order: still the identity view, with another shape
            return Tensor(self.variable, None, _resolve_shape(self.numel, shape))
        return self._view(self.index().reshape(shape))

    def flatten(self) -> "Tensor":
        return self.reshape(self.numel)

    def transpose(self, *perm) -> "Tensor":
        if len(perm) == 1 and isinstance(perm[0], Iterable):
            perm = tuple(perm[0])
        return self._view(np.transpose(self.index(), perm or None))

    @property
    def T(self) -> "Tensor":
        return self.transpose()

    def slice(self, start: int, stop: int, axis: int = 0) -> "Tensor":
        key = [slice(None)] * self.rank
        key[axis] = slice(start, stop)
        return self[tuple(key)]

    def broadcast(self, shape) -> "Tensor":
        return self._view(np.broadcast_to(self.index(), tuple(shape)))

    def __repr__(self) -> str:
        kind = "" if self.is_identity else " view"
        return f"<ipu.Tensor{kind} {self.variable.name!r} {self.dtype.name}{list(self.shape)}>"


class Variable(Tensor):
    """A tensor with storage in tile memory. Create them with `ipu.Graph.add_variable`."""

    __slots__ = ("id", "_name", "_dtype", "category", "tile_of", "initial", "graph_id", "debug")

    def __init__(self, graph_id: int, name: str, shape, dtype, category: str = VARIABLE,
                 initial: np.ndarray | None = None, debug: str = ""):
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise ValueError(f"Variable {name!r}: negative dimension in shape {shape}")
        self.id = next(_ids)
        self._name = name
        self._dtype = element_type(dtype)
        self.category = category
        self.graph_id = graph_id
        self.initial = initial
        self.debug = debug
        n = int(np.prod(shape, dtype=np.int64))
        # Tile of every element; -1 until mapped. int32 covers any number of IPUs.
        self.tile_of = np.full(n, -1, dtype=np.int32)
        super().__init__(self, None, shape)

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self) -> ElementType:
        return self._dtype

    @property
    def numel(self) -> int:
        return int(self.tile_of.size)

    @property
    def nbytes(self) -> int:
        return self.numel * self._dtype.itemsize

    def pieces(self):
        """Runs of consecutive elements on one tile: (starts, stops, tiles) arrays."""
        t = self.tile_of
        if t.size == 0:
            z = np.zeros(0, np.int64)
            return z, z, z.astype(np.int32)
        change = np.flatnonzero(t[1:] != t[:-1]) + 1
        starts = np.concatenate(([0], change)).astype(np.int64)
        stops = np.concatenate((change, [t.size])).astype(np.int64)
        return starts, stops, t[starts]

    def __repr__(self) -> str:
        return f"<ipu.Variable {self._name!r} {self._dtype.name}{list(self.shape)} {self.category}>"

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other) -> bool:
        return self is other
