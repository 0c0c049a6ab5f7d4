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

__all__ = ["CONSTANT", "IndexBlocks", "IndexRuns", "TEMPORARY", "VARIABLE", "Tensor", "Variable"]

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


# An index array at least this long is kept as runs of consecutive indices when that is at least
# eight times smaller (the matmul's block gathers, slices, rows of transposed operands): host memory
# then grows with the runs a program moves, not with its elements.
_COMPACT_MIN = 1 << 14


class IndexRuns:
    """Flat element indices stored as runs: starts[i], starts[i] + 1, ..., starts[i] + lengths[i] - 1."""

    __slots__ = ("starts", "lengths", "size")

    def __init__(self, starts: np.ndarray, lengths: np.ndarray):
        starts = np.asarray(starts, np.int64)
        lengths = np.asarray(lengths, np.int64)
        self.size = int(lengths.sum())
        # int32 when the indices fit (half the host memory); int64 otherwise
        dt = np.int32 if self.size < 2 ** 31 and int(starts.max(initial=0)) < 2 ** 31 else np.int64
        self.starts = np.ascontiguousarray(starts, dt)
        self.lengths = np.ascontiguousarray(lengths, dt)

    @staticmethod
    def of(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(starts, lengths) of the runs of consecutive values in a flat index array."""
        flat = np.asarray(flat, np.int64).reshape(-1)
        if flat.size == 0:
            z = np.zeros(0, np.int64)
            return z, z
        brk = np.flatnonzero(np.diff(flat) != 1) + 1
        first = np.concatenate(([0], brk))
        return flat[first], np.diff(np.append(first, flat.size))

    def expand(self) -> np.ndarray:
        if self.size == 0:
            return np.zeros(0, np.int64)
        # each run's start, minus the position where the run begins, plus the position
        lengths = self.lengths.astype(np.int64)
        offset = self.starts.astype(np.int64) - (np.cumsum(lengths) - lengths)
        return np.repeat(offset, lengths) + np.arange(self.size, dtype=np.int64)


class IndexBlocks:
    """Flat element indices stored block by block, each block an affine map: for every i in the box
    shape[b] (D dims), position e0[b] + i . es[b] of the index holds the value p0[b] + i . ps[b].

    What a variable laid out by its consumer is (popxl/lowering/creators.py): its storage is the
    consumer's operand blocks, and the user's view of it reads each block along strides (a
    transposed weight steps by the block's width). Host memory grows with the blocks, not with
    the elements, and host transfers move a block per NumPy strided assignment (`gather`,
    `scatter`). Positions and values are both covered once (a permutation of a range)."""

    __slots__ = ("e0", "es", "p0", "ps", "box", "size")

    def __init__(self, e0, es, p0, ps, box):
        self.e0 = np.ascontiguousarray(e0, np.int64).reshape(-1)
        self.p0 = np.ascontiguousarray(p0, np.int64).reshape(-1)
        box = np.ascontiguousarray(box, np.int64).reshape(self.e0.size, -1)
        # a dimension of size 1 has no stride (so equal blocks compare equal)
        self.es = np.where(box > 1, np.asarray(es, np.int64).reshape(box.shape), 0)
        self.ps = np.where(box > 1, np.asarray(ps, np.int64).reshape(box.shape), 0)
        self.box = box
        self.size = int(np.prod(box, axis=1).sum()) if box.size else 0

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, a).nbytes for a in ("e0", "es", "p0", "ps", "box"))

    def inverse(self) -> "IndexBlocks":
        """The index with positions and values swapped (its inverse permutation)."""
        return IndexBlocks(self.p0, self.ps, self.e0, self.es, self.box)

    def blocks(self):
        """(e0, es, p0, ps, box) of every block."""
        for b in range(self.e0.size):
            yield int(self.e0[b]), self.es[b], int(self.p0[b]), self.ps[b], tuple(int(d) for d in self.box[b])

    def extents(self) -> np.ndarray:
        """How many values from p0 each block's values span (p0 + extent - 1 is its largest)."""
        return 1 + (self.ps * (self.box - 1)).sum(axis=1)

    @staticmethod
    def at(flat: np.ndarray, start: int, strides, box) -> np.ndarray:
        """The strided block of 1-D contiguous `flat` at `start` (a view: assignments write `flat`)."""
        isz = flat.itemsize
        return np.lib.stride_tricks.as_strided(flat[start:], shape=box, strides=tuple(int(s) * isz for s in strides))

    def gather(self, src: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """out[e] = src[index[e]] for every position e (src and out flat, contiguous)."""
        src = np.ascontiguousarray(src).reshape(-1)
        if out is None:
            out = np.empty(self.size, src.dtype)
        for e0, es, p0, ps, box in self.blocks():
            self.at(out, e0, es, box)[...] = self.at(src, p0, ps, box)
        return out

    def scatter(self, vals: np.ndarray, out: np.ndarray) -> np.ndarray:
        """out[index[e]] = vals[e] for every position e (vals and out flat, contiguous)."""
        vals = np.ascontiguousarray(vals).reshape(-1)
        for e0, es, p0, ps, box in self.blocks():
            self.at(out, p0, ps, box)[...] = self.at(vals, e0, es, box)
        return out

    def expand(self) -> np.ndarray:
        out = np.empty(self.size, np.int64)
        for e0, es, p0, ps, box in self.blocks():
            values = np.full(box, p0, np.int64)
            for d, n in enumerate(box):
                if n > 1:
                    shape = [1] * len(box)
                    shape[d] = n
                    values += (np.arange(n, dtype=np.int64) * int(ps[d])).reshape(shape)
            self.at(out, e0, es, box)[...] = values
        return out

    def offset(self) -> int | None:
        """c when index[e] == e + c for every position e, else None."""
        if self.size == 0:
            return 0
        c = self.p0 - self.e0
        if (c != c[0]).any() or not np.array_equal(self.es, self.ps):
            return None
        return int(c[0])

    def transposed(self, shape: tuple, perm: tuple) -> "IndexBlocks | None":
        """The same index read as an array of `shape` transposed by `perm` (positions renumbered
        in the transposed order), or None when a block crosses an axis of `shape` (the caller
        expands the index then)."""
        n = len(shape)
        if n == 0 or self.size == 0:
            return None
        cstride = np.ones(n, np.int64)
        for a in range(n - 2, -1, -1):
            cstride[a] = cstride[a + 1] * shape[a + 1]
        new_shape = [shape[a] for a in perm]
        new_cstride = np.ones(n, np.int64)
        for a in range(n - 2, -1, -1):
            new_cstride[a] = new_cstride[a + 1] * new_shape[a + 1]
        where = np.empty(n, np.int64)  # where[a]: the position of old axis a in the new order
        where[list(perm)] = np.arange(n)
        coords = np.stack(np.unravel_index(self.e0, tuple(shape)), axis=1)  # (blocks, n)
        reach = coords.copy()  # the last coordinate each block reaches on every axis
        es_new = np.zeros_like(self.es)
        for d in range(self.box.shape[1]):
            live = self.box[:, d] > 1
            if not live.any():
                continue
            es = self.es[live, d]
            # the axis a block dimension walks: the outermost whose stride divides its step
            axis = np.full(es.size, -1, np.int64)
            for a in range(n - 1, -1, -1):
                axis = np.where((es % cstride[a] == 0) & (es > 0), a, axis)
            if (axis < 0).any():
                return None
            q = es // cstride[axis]
            rows = np.flatnonzero(live)
            reach[rows, axis] += q * (self.box[live, d] - 1)
            es_new[live, d] = q * new_cstride[where[axis]]
        if (reach >= np.asarray(shape, np.int64)).any():
            return None  # a block carries over into the next coordinate of some axis
        e0_new = (coords[:, list(perm)] * new_cstride).sum(axis=1)
        return IndexBlocks(e0_new, es_new, self.p0, self.ps, self.box)


def _compact(index):
    """`index` as IndexRuns when that is much smaller, else unchanged."""
    if not isinstance(index, np.ndarray) or index.size < _COMPACT_MIN:
        return index
    head = index.flat[:4096]  # (not reshape(-1)[:4096]: that copies a transposed index whole first)
    if np.count_nonzero(np.diff(head) != 1) * 8 > head.size:  # a sample says: not mostly runs
        return index
    starts, lengths = IndexRuns.of(index)
    if starts.size * 8 > index.size:
        return index
    return IndexRuns(starts, lengths)


class Tensor:
    """A view of a variable's elements with a shape."""

    __slots__ = ("variable", "_index", "shape")

    def __init__(self, variable: "Variable", index: "np.ndarray | IndexRuns | IndexBlocks | None",
                 shape: tuple[int, ...]):
        self.variable = variable
        # None means the identity view of the whole variable; a long index that is mostly runs of
        # consecutive elements is kept as IndexRuns
        self._index = _compact(index)
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
        if isinstance(self._index, (IndexRuns, IndexBlocks)):
            return self._index.expand().reshape(self.shape)
        return self._index

    def flat_index(self) -> np.ndarray:
        return self.index().reshape(-1)

    def index_runs(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, lengths) of the runs of consecutive elements the view reads, in its order:
        what copies are compiled from (one entry per run, not per element)."""
        if self._index is None:
            n = self.variable.numel
            return np.zeros(1 if n else 0, np.int64), np.full(1 if n else 0, n, np.int64)
        if isinstance(self._index, IndexRuns):
            return self._index.starts.astype(np.int64), self._index.lengths.astype(np.int64)
        return IndexRuns.of(self.index())

    def contiguous_range(self) -> tuple[int, int] | None:
        """(start, count) if the view is a run of consecutive elements of its variable, else None."""
        if self._index is None:
            return 0, self.variable.numel
        if isinstance(self._index, IndexRuns):
            r = self._index
            return (int(r.starts[0]), r.size) if r.starts.size == 1 else (None if r.size else (0, 0))
        if isinstance(self._index, IndexBlocks):
            c = self._index.offset()
            return None if c is None else (c, self._index.size)
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

    def index_parts(self) -> tuple:
        """The index as it is kept (not expanded), for comparing views: ("identity",), ("runs",
        starts, lengths), ("blocks", e0, es, p0, ps, box) or ("array", index)."""
        idx = self._index
        if idx is None:
            return ("identity",)
        if isinstance(idx, IndexRuns):
            return ("runs", idx.starts, idx.lengths)
        if isinstance(idx, IndexBlocks):
            return ("blocks", idx.e0, idx.es, idx.p0, idx.ps, idx.box)
        return ("array", np.asarray(idx))

    def of_variable(self, variable: "Variable") -> "Tensor":
        """The same view (the same index object, not a copy) of another variable of as many
        elements: a builder's views replayed on the next layer's variables (ipu/replay.py)."""
        t = Tensor.__new__(Tensor)
        t.variable, t._index, t.shape = variable, self._index, self.shape
        return t

    @property
    def blocks(self) -> IndexBlocks | None:
        """The index as IndexBlocks when it is kept so (a variable its consumer laid out), else None."""
        return self._index if isinstance(self._index, IndexBlocks) else None

    def __getitem__(self, key) -> "Tensor":
        return self._view(self.index()[key])

    def reshape(self, *shape) -> "Tensor":
        if len(shape) == 1 and isinstance(shape[0], Iterable):
            shape = tuple(shape[0])
        if self._index is None or isinstance(self._index, IndexBlocks):
            # a reshape keeps the flat order: the same index (identity or by blocks), another shape
            return Tensor(self.variable, self._index, _resolve_shape(self.numel, shape))
        return self._view(self.index().reshape(shape))

    def flatten(self) -> "Tensor":
        return self.reshape(self.numel)

    def transpose(self, *perm) -> "Tensor":
        if len(perm) == 1 and isinstance(perm[0], Iterable):
            perm = tuple(perm[0])
        if isinstance(self._index, IndexBlocks):
            axes = tuple(int(p) + self.rank if int(p) < 0 else int(p) for p in perm)
            axes = axes or tuple(range(self.rank))[::-1]
            moved = self._index.transposed(self.shape, axes) if sorted(axes) == list(range(self.rank)) else None
            if moved is not None:
                return Tensor(self.variable, moved, tuple(self.shape[p] for p in axes))
        return self._view(np.transpose(self.index(), perm or None))

    @property
    def T(self) -> "Tensor":  # noqa: N802  (NumPy's name)
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

    __slots__ = ("id", "_name", "_dtype", "category", "_tile_of", "_pieces", "_numel", "initial", "graph_id",
                 "debug")

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
        self._numel = int(np.prod(shape, dtype=np.int64))
        self._tile_of: np.ndarray | None = None  # per-element tile table, made on first use
        # or the same mapping as pieces (starts, stops, tiles):
        self._pieces: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        super().__init__(self, None, shape)

    @property
    def tile_of(self) -> np.ndarray:
        """The tile of every element (int32, -1 where unmapped). A variable mapped by pieces
        (`set_tile_runs`, or `compact` after compiling) keeps only its pieces until this is read."""
        if self._tile_of is None:
            t = np.full(self._numel, -1, dtype=np.int32)
            if self._pieces is not None:
                starts, stops, tiles = self._pieces
                t[:] = np.repeat(tiles.astype(np.int32), stops - starts)
                self._pieces = None
            self._tile_of = t
        return self._tile_of

    @tile_of.setter
    def tile_of(self, value) -> None:
        self._pieces = None
        self._tile_of = np.asarray(value, np.int32).reshape(-1)

    def set_tile_runs(self, tiles, counts) -> None:
        """Map the variable as consecutive runs: counts[i] elements on tiles[i] (no per-element table)."""
        tiles = np.asarray(tiles, np.int64).reshape(-1)
        counts = np.asarray(counts, np.int64).reshape(-1)
        if int(counts.sum()) != self._numel or (counts < 0).any():
            raise ValueError(f"set_tile_runs: the runs of {self._name!r} cover {int(counts.sum())} elements, "
                             f"it has {self._numel}")
        keep = counts > 0
        tiles, counts = tiles[keep], counts[keep]
        stops = np.cumsum(counts)
        self._tile_of = None
        self._pieces = (stops - counts, stops, tiles.astype(np.int32))

    def mapping_parts(self) -> tuple:
        """The mapping as it is held (not copied), for comparing mappings: ("pieces", starts,
        stops, tiles), ("table", tile table) or ("unmapped",)."""
        if self._tile_of is not None:
            return ("table", self._tile_of)
        return ("unmapped",) if self._pieces is None else ("pieces", *self._pieces)

    def mapping_state(self) -> tuple:
        """The mapping as held, (tile table or None, pieces or None), for set_mapping_state: a
        table copied (set_tile_mapping writes tables in place), pieces shared (only ever replaced)."""
        return (None if self._tile_of is None else self._tile_of.copy()), self._pieces

    def set_mapping_state(self, state: tuple) -> None:
        """Take a mapping_state (of this variable or another of as many elements)."""
        table, pieces = state
        self._tile_of = None if table is None else table.copy()
        self._pieces = pieces

    def map_like(self, other: "Variable") -> None:
        """Give this variable the mapping of `other` (same number of elements), sharing its pieces
        when `other` keeps them so."""
        if other._numel != self._numel:
            raise ValueError(f"map_like: {self._name!r} has {self._numel} elements, {other._name!r} {other._numel}")
        if other._tile_of is None and other._pieces is not None:
            self._tile_of, self._pieces = None, other._pieces
        elif other.unmapped() == 0:
            self._tile_of, self._pieces = None, other.pieces()
        else:
            self.tile_of = other.tile_of.copy()

    def tiles_at(self, flat) -> np.ndarray:
        """The tiles of the given flat elements (int32), read from the pieces when the variable
        keeps them (no per-element table is made)."""
        flat = np.asarray(flat, np.int64)
        if self._tile_of is None and self._pieces is not None:
            starts, stops, tiles = self._pieces
            if 4 * flat.size >= self._numel:  # most of it: a table of the pieces' tiles, indexed
                return np.repeat(tiles.astype(np.int32), stops - starts)[flat]  # (the pieces cover it all)
            return tiles[np.searchsorted(starts, flat, side="right") - 1].astype(np.int32)
        return self.tile_of[flat]

    def same_mapping(self, other: "Variable") -> bool:
        """True if both variables have the same number of elements on the same tiles in order."""
        if other._numel != self._numel:
            return False
        if self._pieces is not None and self._pieces is other._pieces:
            return True
        a, b = self.pieces(), other.pieces()
        return all(np.array_equal(x, y) for x, y in zip(a, b))

    def tiles_per_element_count(self, num_tiles: int) -> np.ndarray:
        """Elements on each tile (from the pieces when the variable keeps them)."""
        if self._tile_of is None and self._pieces is not None:
            starts, stops, tiles = self._pieces
            return np.bincount(tiles.astype(np.int64), weights=stops - starts, minlength=num_tiles).astype(np.int64)
        t = self.tile_of
        return np.bincount(t[t >= 0], minlength=num_tiles)

    def compact(self) -> None:
        """Keep the mapping as pieces only (after compiling, when nothing maps it any more)."""
        if self._tile_of is not None and (self._tile_of >= 0).all():
            self._pieces = self.pieces()
            self._tile_of = None

    def unmapped(self) -> int:
        """How many elements have no tile yet."""
        if self._tile_of is None:
            return 0 if self._pieces is not None or self._numel == 0 else self._numel
        return int(np.count_nonzero(self._tile_of < 0))

    @property
    def name(self) -> str:
        return self._name

    @property
    def dtype(self) -> ElementType:
        return self._dtype

    @property
    def numel(self) -> int:
        return self._numel

    @property
    def nbytes(self) -> int:
        return self.numel * self._dtype.itemsize

    def pieces(self):
        """Runs of consecutive elements on one tile: (starts, stops, tiles) arrays."""
        if self._tile_of is None and self._pieces is not None:
            return self._pieces
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
