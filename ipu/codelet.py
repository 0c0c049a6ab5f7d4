"""The codelet interface and registry.

A codelet is a vertex type. It declares its fields (tensor connections, each a run of consecutive
elements on the vertex's tile) and per-vertex parameters, and provides:

- `kernel`: a Numba function that runs *all* vertices of one compute set that use this codelet
  with one field-type combination, in a single call:
  `kernel(views, off, cnt, fp, ip)` where `views[f]` is the typed view of tile memory for field f
  (see `ipu.half` for float16), `off[v, f]` the element offset of vertex v's field f in that view,
  `cnt[v, f]` its element count, `fp[v, :]` float parameters and `ip[v, :]` int parameters;
- `cycles`: the cost model, vectorised over vertices, with its source written beside the formula;
- `code_bytes` and `state_bytes`: what the vertex code and each vertex's state occupy on a tile;
- `reference`: a NumPy implementation of the same arithmetic, for tests.

Fields and parameters are declared by name and read by name. Every codelet class gets, from its
declaration, the column of each name in its vertex tables: `F` (fields: `views`, `types`, `off`,
`cnt`), `FP` (float parameters: `fp`), `IP` (int parameters: `ip`), so a kernel reads
`off[v, F.data]` and `fp[v, FP.scale]`, which Numba compiles to the same code as `off[v, 0]`
(`Columns`). Its NumPy methods read the same tables through `table(types, cnt, fp, ip)`:
`t.count.data`, `t.type.data`, `t.scale`. A codelet whose cost model follows a poplibs estimator
names that vertex (`poplibs_vertices`) and builds it from a row of the calibration table
(`calibration_vertex`), which profiler/calibrate.py scores without knowing the codelet.

Codelets register themselves by name with `register`, which refuses a second codelet of a name.
`ipu/` has none of its own and imports nothing of the project: the built-in ones live in the
`codelets` package, registered when the layer above imports it (`import codelets`; popxl does).
"""
from __future__ import annotations

import inspect
import keyword
import os
import sys
import types as pytypes
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

__all__ = ["IN", "INOUT", "OUT", "Codelet", "Columns", "Field", "Vertex", "VertexTable", "columns", "get_codelet",
           "register", "registered_codelets"]

IN, OUT, INOUT = "in", "out", "inout"


@dataclass(frozen=True)
class Field:
    name: str
    direction: str = IN


def attribute_name(name: str) -> str:
    """The attribute a declared name is read as: itself, or with a trailing underscore when it is a
    Python keyword (the field `in` is `F.in_`)."""
    return name + "_" if keyword.iskeyword(name) else name


class Columns(pytypes.ModuleType):
    """The column of every name of one of a codelet's vertex tables, from its declaration:
    `F.data` is 0 when `data` is the first field.

    A module object, because Numba kernels read a module's attributes as compile-time constants:
    `off[v, F.data]` compiles to the same machine code as `off[v, 0]`, and `views[F.data]` may index
    the tuple of differently typed views, which only a constant can (an IntEnum member indexes
    arrays but not such a tuple; an ordinary class is not visible to Numba at all)."""

    def __init__(self, owner: str, names):
        super().__init__(owner)
        self.__names = tuple(names)
        for i, n in enumerate(self.__names):
            setattr(self, attribute_name(n), i)

    def __iter__(self):
        return iter(self.__names)

    def __len__(self) -> int:
        return len(self.__names)

    def __repr__(self) -> str:
        return f"<columns {self.__name__}: {', '.join(f'{n}={i}' for i, n in enumerate(self.__names))}>"


def columns(owner: str, names) -> Columns:
    """The Columns of `names` (declared names, in their order); refuses repeated or unusable names."""
    names = tuple(names)
    for n in names:
        if not isinstance(n, str) or not n.isidentifier():
            raise ValueError(f"{owner}: {n!r} cannot name a field or parameter (it must be an identifier)")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{owner}: {', '.join(map(repr, twice))} declared twice")
    return Columns(owner, names)


class _Named:
    """Values by declared name, as attributes (`Columns` spelling: a keyword gets a trailing _)."""

    def __init__(self, what: str, names, values):
        self._what = what
        for n, v in zip(names, values):
            setattr(self, attribute_name(n), v)

    def __getattr__(self, name):
        raise AttributeError(f"{self._what} has no {name!r}")


class VertexTable:
    """A codelet's vertex tables by name, for its NumPy methods (`check`, `cycles`): `type.<field>`
    is the field's element type, `count.<field>` its column of element counts (one per vertex),
    and every parameter is its column of `fp` or `ip` by its own name (`t.scale`, `t.op`)."""

    def __init__(self, codelet: "Codelet", types, cnt, fp=None, ip=None):
        fields = codelet.field_names
        self.type = _Named(f"{codelet.name}'s fields", fields, tuple(types))
        self.count = _Named(f"{codelet.name}'s fields", fields, [cnt[:, j] for j in range(len(fields))])
        for names, arr in ((codelet.float_params, fp), (codelet.int_params, ip)):
            if arr is not None:  # a method that reads no parameters need not pass them
                for j, n in enumerate(names):
                    setattr(self, attribute_name(n), arr[:, j])
        self._codelet = codelet.name

    def __getattr__(self, name):
        raise AttributeError(f"codelet {self._codelet} has no parameter {name!r} (fields: .type.<field>, "
                             f".count.<field>)")


@dataclass(frozen=True)
class Vertex:
    """One vertex of a codelet, by name: each field's element type and element count, and each
    parameter's value (what a calibration row describes; `Codelet.vertex_cycles` prices it)."""

    types: dict  # field name -> ipu.ElementType
    counts: dict  # field name -> elements
    params: dict = field(default_factory=dict)  # parameter name -> value


class Codelet:
    name: str = ""
    fields: tuple = ()
    float_params: tuple = ()
    int_params: tuple = ()
    # Int parameters that are template parameters of the poplibs vertex class (the operation of
    # popops' BinaryOp1DSupervisor<op, T>, Reduce<ReduceOp, ..., specialisation>): each value is
    # its own instantiation, so it selects the vertex code (held once per tile per value) and is
    # no vertex state.
    template_params: tuple = ()
    # A supervisor vertex occupies all worker contexts of its tile and its cycles are tile cycles;
    # a worker vertex runs on one context and its cycles are that context's (thread) cycles.
    supervisor: bool = False
    # Element types the kernel accepts, per field; None means any type tile memory holds.
    allowed_types: tuple | None = None
    # float8 data reaches only codelets that say they take it (the casts, the float8 AMP, copies):
    # elsewhere its one-byte records would be misread as numbers
    takes_float8: bool = False

    # The poplibs vertices whose cycle estimators this codelet's cost model follows (the `vertex`
    # column of codelets/reference_cycles.csv, e.g. "popops::ScaledAddSupervisor"); see
    # `calibration_vertex`.
    poplibs_vertices: tuple = ()

    # each subclass's columns of its fields and parameters (set by __init_subclass__ below)
    F: ClassVar[Columns]
    FP: ClassVar[Columns]
    IP: ClassVar[Columns]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        owner = cls.__qualname__
        cls.F = columns(f"{owner}.F", [f.name for f in cls.fields])
        cls.FP = columns(f"{owner}.FP", cls.float_params)
        cls.IP = columns(f"{owner}.IP", cls.int_params)
        clash = {"type", "count"} & {*cls.float_params, *cls.int_params}
        if clash:
            raise ValueError(f"codelet {owner}: a parameter cannot be named {', '.join(sorted(clash))} (the "
                             f"names of table(...)'s field views)")
        unknown = set(cls.template_params) - set(cls.int_params)
        if unknown:
            raise ValueError(f"codelet {owner}: template_params {sorted(unknown)} are not among its int_params")

    def kernel(self):
        raise NotImplementedError

    def cycles(self, types, cnt: np.ndarray, fp: np.ndarray, ip: np.ndarray, target) -> np.ndarray:
        raise NotImplementedError

    def code_bytes(self, types) -> int:
        """Bytes of vertex code for one field-type combination (held once per tile that uses it)."""
        return 256

    def code_variants(self, types, ip: np.ndarray) -> list:
        """[(code key, mask of the vertices (rows of ip) using it, or None for all)]: the vertex code
        a tile holds once per key, one per field-type combination and value of the template
        parameters (each value is its own instantiation of the poplibs vertex class)."""
        if not self.template_params:
            return [((self.name, types), None)]
        cols = [self.int_params.index(p) for p in self.template_params]
        chosen = ip[:, cols]
        if chosen.shape[0] and (chosen == chosen[0]).all():  # mostly one value: no sort of the rows
            return [((self.name, types, tuple(int(x) for x in chosen[0])), None)]
        if len(cols) == 1:  # one parameter: a plain sort, in the order of the rows' unique
            values, which = np.unique(chosen[:, 0], return_inverse=True)
            values = values[:, None]
        else:
            values, which = np.unique(chosen, axis=0, return_inverse=True)
        which = which.reshape(-1)
        return [((self.name, types, tuple(int(x) for x in v)), which == j) for j, v in enumerate(values)]

    def state_bytes(self) -> int:
        """Bytes of state per vertex: a 4-byte pointer and a 2-byte size per field, 4 per parameter
        that is not a template parameter (Poplar vertex state layout: ScaledPtr32 + count)."""
        return 6 * len(self.fields) + 4 * (len(self.float_params) + len(self.int_params) - len(self.template_params))

    # A multi-region codelet is a poplibs 2D vertex: each field is a vector of regions, and one vertex
    # (one per worker context on a tile, poplibs' splitRegionsBetweenWorkers) walks several regions.
    # Its rows are regions (VertexChunk.region says which start a vertex): `cycles` costs a row as a
    # one-region vertex, and a further region costs that less `vertex_overhead_cycles`
    # (`further_region_cycles`); the state is the vertex's (`vertex_state_bytes` of its first row:
    # its outer vectors and parameters) plus `region_state_bytes` a region (`region_state`).
    multi_region: bool = False

    def vertex_overhead_cycles(self, types) -> int:
        """Cycles a multi-region vertex pays once, not per region (its estimator's fixed part)."""
        return 0

    def further_region_cycles(self, types, cnt, fp, ip, target, cycles) -> np.ndarray:
        """Cycles of rows that continue a multi-region vertex, from `cycles` (each row's as a
        one-region vertex): less the vertex's fixed part (per row, where it depends on them)."""
        return cycles - self.vertex_overhead_cycles(types)

    def region_state_bytes(self) -> int:
        """Bytes of state per region of a multi-region vertex: each field's inner vector, a pointer
        and a size (as `state_bytes` counts a field)."""
        return 6 * len(self.fields)

    def region_state(self, types, cnt: np.ndarray, ip: np.ndarray) -> np.ndarray:
        """Bytes of state of each row's region (int64[rows]): `region_state_bytes()` each, unless a
        region's state depends on the vertex's parameters."""
        return np.full(len(cnt), self.region_state_bytes(), np.int64)

    def vertex_state_bytes(self, types, cnt: np.ndarray, ip: np.ndarray) -> np.ndarray:
        """Bytes of state of each vertex (int64[V]): `state_bytes()` each, unless the codelet's state
        grows with its parameters (a vertex whose fields are vectors of regions, or that carries
        work lists, as poplin's convolution vertices do)."""
        return np.full(len(cnt), self.state_bytes(), np.int64)

    def check(self, types, cnt: np.ndarray, fp: np.ndarray, ip: np.ndarray) -> None:
        """Raise ValueError if the vertices' fields or parameters do not fit this codelet."""

    def reads_inout(self, field: str, ip: np.ndarray) -> np.ndarray | None:
        """Which vertices (rows of ip) read in/out field `field` before writing it (bool per
        vertex), or None: every vertex does (the default). A vertex that does not writes the whole
        field without reading it (MatMulBlock's `out` with accumulate 0): ipu/forwarding.py counts
        it as no read of what the memory held."""
        return None

    # fields (in fields) whose rows the codelet's `rows_kernel` can read from anywhere in the view:
    # what ipu/forwarding.py uses to feed a vertex that gathers rows from several copy runs
    row_fields: tuple = ()

    def read_rows(self, field: str, types, cnt: np.ndarray, ip: np.ndarray) -> np.ndarray | None:
        """The row length (elements, per vertex: rows of cnt and ip) in which `rows_kernel` may
        read field `field` of vertices of these field types, or None where it cannot (the default)."""
        return None

    def rows_kernel(self):
        """The kernel of a group some of whose vertices read `row_fields` row by row: ip holds the
        codelet's int parameters, then S (the most segments of any such read), then per row field
        a segment count and S (first row, element offset) pairs: the rows of segment i, from its
        first row to the next segment's (the last: to the field's end), lie one after another from
        that offset. A count of 0: the field is read at its own offset, as `kernel` reads it."""
        return None

    def reference(self, *arrays, **params):
        raise NotImplementedError

    def table(self, types, cnt, fp=None, ip=None) -> VertexTable:
        """The vertex tables of `check` / `cycles` by name (`VertexTable`)."""
        return VertexTable(self, types, cnt, fp, ip)

    def calibration_vertex(self, vertex: str, types: tuple, n: int, params: dict) -> Vertex:
        """This codelet's vertex for one row of a calibration table (profiler/calibrate.py): the
        poplibs vertex `vertex` (one of `poplibs_vertices`) over `n` elements of the row's element
        types `types` (one, or two for a conversion: in, out), with the row's parameters by their
        poplibs names (`op=ADD`, `regionSize=16`, ...). Raises KeyError naming what the row lacks."""
        raise KeyError(f"codelet {self.name} has no calibration against {vertex}")

    def vertex_cycles(self, vertex: Vertex, target) -> int:
        """The cycles of one vertex given by name (checked as Graph.add_vertex checks it)."""
        missing = [f for f in self.field_names if f not in vertex.types or f not in vertex.counts]
        unknown = sorted(set(vertex.params) - {*self.float_params, *self.int_params})
        absent = [p for p in (*self.float_params, *self.int_params) if p not in vertex.params]
        if missing or unknown or absent:
            raise KeyError(f"codelet {self.name}: a vertex needs every field ({', '.join(self.field_names)}) and "
                           f"parameter; missing fields {missing}, missing parameters {absent}, unknown {unknown}")
        types = tuple(vertex.types[f] for f in self.field_names)
        cnt = np.array([[vertex.counts[f] for f in self.field_names]], np.int64)
        fp = np.array([[vertex.params[p] for p in self.float_params]], np.float64).reshape(1, -1)
        ip = np.array([[vertex.params[p] for p in self.int_params]], np.int64).reshape(1, -1)
        self.check(types, cnt, fp, ip)
        return int(np.asarray(self.cycles(types, cnt, fp, ip, target))[0])

    @property
    def field_names(self) -> tuple:
        return tuple(f.name for f in self.fields)

    def __repr__(self) -> str:
        return f"<codelet {self.name}>"


_REGISTRY: dict[str, Codelet] = {}


def register(codelet):
    """Register a codelet instance (or class, which is instantiated). Returns it, so it can decorate.

    A name is registered once: a codelet of another class under a registered name raises
    ValueError. The same class defined again (a reloaded module) replaces its earlier definition."""
    inst = codelet() if isinstance(codelet, type) else codelet
    if not inst.name:
        raise ValueError(f"{codelet!r} has no name")
    have = _REGISTRY.get(inst.name)
    if have is not None:
        if have is inst:
            return codelet
        if not _same_class(type(have), type(inst)):
            raise ValueError(
                f"A codelet named {inst.name!r} is already registered ({type(have).__module__}."
                f"{type(have).__qualname__}); give {type(inst).__qualname__} another name.")
    _REGISTRY[inst.name] = inst
    return codelet


def _same_class(a: type, b: type) -> bool:
    """The same class, or the same class defined again: a reloaded module, or a script's module
    run both as __main__ and imported (Numba's cache imports it to rebuild a cached kernel)."""
    if a is b:
        return True
    if a.__qualname__ != b.__qualname__:
        return False
    return a.__module__ == b.__module__ or _source(a) == _source(b) is not None


def _source(cls):
    try:
        return os.path.realpath(inspect.getsourcefile(cls))
    except (TypeError, OSError):
        return None


def get_codelet(name_or_codelet) -> Codelet:
    if isinstance(name_or_codelet, Codelet):
        return name_or_codelet
    try:
        return _REGISTRY[name_or_codelet]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        hint = ("" if "codelets" in sys.modules else
                " The built-in codelets register when their package is imported: `import codelets`.")
        raise KeyError(
            f"No codelet named {name_or_codelet!r}. Registered codelets: {known}.{hint} "
            f"Define one by subclassing ipu.Codelet and decorating it with @ipu.register."
        ) from None


def registered_codelets() -> dict:
    return dict(_REGISTRY)
