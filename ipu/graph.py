"""The tile-level graph: variables with tile mappings, compute sets of vertices, host streams.

This is the direct programming API of the simulated IPU (the counterpart of poplar::Graph):

    g = ipu.Graph(ipu.small_target(4))
    x = g.add_variable("x", (1000,), "float32")
    g.map_linearly(x)
    cs = g.add_compute_set("double")
    for tile, piece in g.tile_pieces(x):
        g.add_vertex(cs, "ScaledAdd", tile, data=piece, deltas=piece, scale=1.0)
    exe = ipu.compile(g, ipu.Execute(cs))
"""
from __future__ import annotations

import itertools

import numpy as np

from .codelet import get_codelet
from .errors import CompileError, MappingError
from .graph_objects import ComputeSet, Function, HostStream, RemoteBuffer, VertexChunk, transfer_limit_message
from .memory import check_tensor_can_fit
from .program import Program
from .target import Target
from .tensor import CONSTANT, TEMPORARY, VARIABLE, Tensor, Variable
from .types import element_type

__all__ = ["ComputeSet", "Function", "Graph", "HostStream", "VertexChunk"]

_graph_ids = itertools.count()


class Graph:
    def __init__(self, target: Target):
        if not isinstance(target, Target):
            raise TypeError(f"ipu.Graph needs an ipu.Target, got {type(target).__name__}")
        self.target = target
        self._num_tiles = target.num_tiles  # checked once per tile of every mapping
        self.id = next(_graph_ids)
        self.variables: list[Variable] = []
        self.compute_sets: list[ComputeSet] = []
        self.streams: dict[str, HostStream] = {}
        self.functions: list[Function] = []
        self.remote_buffers: dict = {}  # name -> ipu.RemoteBuffer (streaming memory, ipu/remote.py)
        self._names: set[str] = set()
        self._next_suffix: dict[str, int] = {}  # base name -> first suffix that may be free
        self._always_live_bytes = 0  # of the variables and constants so far (check_tensor_can_fit)

    # -- tensors ------------------------------------------------------------------------------
    def _unique(self, name: str) -> str:
        """`name`, or `name.N` with the smallest free N: every suffix below the one remembered
        per name is taken (names are never released), so a program of many ops of one name costs
        one look-up per name instead of a scan of all the earlier ones."""
        base = name or "t"
        out = base
        if out in self._names:
            n = self._next_suffix.get(base, 1)
            while f"{base}.{n}" in self._names:
                n += 1
            out = f"{base}.{n}"
            self._next_suffix[base] = n + 1
        self._names.add(out)
        return out

    def add_variable(self, name: str, shape, dtype="float32", category: str = VARIABLE,
                     debug: str = "") -> Variable:
        """A tensor with storage. category: 'variable' (always live), 'temporary' (live only
        between first and last use) or 'constant'."""
        if category not in (VARIABLE, TEMPORARY, CONSTANT):
            raise ValueError(f"category must be 'variable', 'temporary' or 'constant', not {category!r}")
        v = Variable(self.id, self._unique(name), shape, dtype, category, debug=debug)
        self._admit(v)
        self.variables.append(v)
        return v

    def _admit(self, v: Variable) -> None:
        """Refuse early a tensor that cannot fit the target's memory, before anything maps it."""
        check_tensor_can_fit(self.target, v.name, v.nbytes, v.category, self._always_live_bytes)
        if v.category != TEMPORARY:
            self._always_live_bytes += v.nbytes

    def add_constant(self, name: str, data, dtype=None, tile: int | None = None, debug: str = "") -> Variable:
        """A constant initialised from `data` (copied); mapped to `tile` if given."""
        et = element_type(dtype if dtype is not None else np.asarray(data).dtype)
        arr = np.array(data, dtype=et.numpy, copy=True)
        v = Variable(self.id, self._unique(name), arr.shape, et, CONSTANT, initial=arr, debug=debug)
        self._admit(v)
        self.variables.append(v)
        if tile is not None:
            self.set_tile_mapping(v, tile)
        return v

    def _check_tile(self, tile: int | np.integer) -> int:
        tile = int(tile)
        if not 0 <= tile < self._num_tiles:
            raise MappingError(
                f"tile {tile} does not exist on {self.target.name}: tiles are 0..{self.target.num_tiles - 1}"
            )
        return tile

    def _check_tensor(self, t: Tensor) -> None:
        if not isinstance(t, Tensor):
            raise TypeError(f"expected an ipu.Tensor, got {type(t).__name__}")
        if t.variable.graph_id != self.id:
            raise ValueError(f"tensor {t.name!r} belongs to another ipu.Graph")

    def set_tile_mapping(self, tensor: Tensor, mapping) -> None:
        """Map a tensor's elements to tiles.

        mapping: a tile number (every element of the view on that tile); or a dict
        {tile: [(start, stop), ...]} of intervals of the view's flat elements; or a sequence with
        one list of intervals per tile, as Poplar's `setTileMapping` takes.
        """
        self._check_tensor(tensor)
        flat = tensor.flat_index()
        tile_of = tensor.variable.tile_of
        if isinstance(mapping, (int, np.integer)):
            tile_of[flat] = self._check_tile(mapping)
            return
        items = mapping.items() if isinstance(mapping, dict) else enumerate(mapping)
        for tile, intervals in items:
            tile = self._check_tile(tile)
            for start, stop in intervals:
                if not 0 <= start <= stop <= flat.size:
                    raise MappingError(
                        f"interval [{start}, {stop}) is outside tensor {tensor.name!r} of {flat.size} elements"
                    )
                tile_of[flat[start:stop]] = tile

    def map_linearly(self, tensor: Tensor, grain: int = 1, tiles=None, min_elements_per_tile: int = 1) -> None:
        """Spread the view's elements over tiles in consecutive chunks (multiples of `grain`),
        as evenly as possible, like poputil::mapTensorLinearly."""
        self._check_tensor(tensor)
        tiles = np.arange(self.target.num_tiles) if tiles is None else np.asarray(list(tiles), dtype=np.int64)
        bad = np.flatnonzero((tiles < 0) | (tiles >= self._num_tiles))
        if bad.size:  # (one check of the array: a call per tile was 1.7% of BERT-base's compile)
            self._check_tile(tiles[bad[0]])
        n = tensor.numel
        if n == 0:
            return
        grains = -(-n // grain)
        per_tile = max(-(-grains // len(tiles)), -(-max(1, min_elements_per_tile) // grain))
        chunk = per_tile * grain
        if tensor.is_identity:  # the whole variable: its mapping is runs, kept without a per-element table
            used = min(len(tiles), -(-n // chunk))
            counts = np.full(used, chunk, np.int64)
            counts[-1] = n - chunk * (used - 1)
            tensor.variable.set_tile_runs(tiles[:used], counts)
            return
        which = np.minimum(np.arange(n, dtype=np.int64) // chunk, len(tiles) - 1)
        tensor.variable.tile_of[tensor.flat_index()] = tiles[which].astype(np.int32)

    def tile_pieces(self, tensor: Tensor):
        """[(tile, view)] for each run of consecutive elements of a variable on one tile."""
        self._check_tensor(tensor)
        if not tensor.is_identity:
            raise ValueError("tile_pieces takes a whole variable, not a view")
        starts, stops, tiles = tensor.variable.pieces()
        flat = tensor.variable.flatten()
        return [(int(t), flat[int(a):int(b)]) for a, b, t in zip(starts, stops, tiles)]

    # -- compute ------------------------------------------------------------------------------
    def add_compute_set(self, name: str = "cs", debug: str = "") -> ComputeSet:
        cs = ComputeSet(self._unique(name), debug=debug)
        self.compute_sets.append(cs)
        return cs

    def add_vertex(self, compute_set: ComputeSet, codelet, tile: int, **connections) -> None:
        """Add one vertex of `codelet` on `tile`. Keyword arguments connect each field to a
        tensor view whose elements are consecutive in its variable, and give each parameter."""
        c = get_codelet(codelet)
        tile = self._check_tile(tile)
        field_vars, starts, counts = [], [], []
        for f in c.fields:
            if f.name not in connections:
                raise ValueError(f"vertex {c.name}: field {f.name!r} is not connected")
            t = connections.pop(f.name)
            self._check_tensor(t)
            rng = t.contiguous_range()
            if rng is None:
                raise ValueError(
                    f"vertex {c.name} on tile {tile}: field {f.name!r} is connected to a view of "
                    f"{t.name!r} whose elements are not consecutive; Copy it into a contiguous tensor first"
                )
            field_vars.append(t.variable)
            starts.append(rng[0])
            counts.append(rng[1])
        fp = [float(connections.pop(p)) for p in c.float_params if p in connections]
        ip = [int(connections.pop(p)) for p in c.int_params if p in connections]
        if len(fp) != len(c.float_params) or len(ip) != len(c.int_params):
            missing = [p for p in (*c.float_params, *c.int_params)]
            raise ValueError(f"vertex {c.name}: parameters {missing} must all be given")
        if connections:
            raise ValueError(f"vertex {c.name}: unknown fields or parameters {sorted(connections)}")
        self._add_chunk(compute_set, c, np.array([tile]), tuple(field_vars),
                        np.array([starts], np.int64), np.array([counts], np.int64),
                        np.array([fp], np.float64).reshape(1, len(c.float_params)),
                        np.array([ip], np.int64).reshape(1, len(c.int_params)))

    def add_vertices(self, compute_set: ComputeSet, codelet, tiles, fields: dict, fp=None, ip=None,
                     region=None) -> None:
        """Add many vertices of one codelet at once (what lowering rules use).

        fields: {field_name: (variable, starts, counts)} with arrays over vertices of the first
        element (flat index in the variable) and the element count of each vertex's field.
        fp / ip: float / int parameters, arrays of shape (n, P) / (n, Q) or per-parameter dicts.
        region: for a multi-region codelet (poplibs' 2D vertices: one vertex over several regions),
        each row's place among its vertex's regions (0 starts a vertex, and the rows of a vertex
        follow it on the same tile with the same parameters); None: one vertex per row.
        """
        c = get_codelet(codelet)
        tiles = np.asarray(tiles, dtype=np.int64).reshape(-1)
        n = tiles.size
        if n == 0:
            return
        if tiles.min() < 0 or tiles.max() >= self.target.num_tiles:
            raise MappingError(f"vertex tiles must be in 0..{self.target.num_tiles - 1}")
        field_vars, starts, counts = [], [], []
        for f in c.fields:
            if f.name not in fields:
                raise ValueError(f"vertices {c.name}: field {f.name!r} is not connected")
            var, s, k = fields[f.name]
            self._check_tensor(var)
            if not var.is_identity:
                raise ValueError("add_vertices takes whole variables with element starts and counts")
            field_vars.append(var)
            starts.append(np.broadcast_to(np.asarray(s, np.int64), (n,)))
            counts.append(np.broadcast_to(np.asarray(k, np.int64), (n,)))
        fp = self._params(fp, c.float_params, n, np.float64, c.name)
        ip = self._params(ip, c.int_params, n, np.int64, c.name)
        if region is not None:
            region = self._check_regions(c, tiles, np.asarray(region, np.int64).reshape(-1), fp, ip)
        self._add_chunk(compute_set, c, tiles, tuple(field_vars), np.stack(starts, 1), np.stack(counts, 1), fp, ip,
                        region)

    @staticmethod
    def _check_regions(c, tiles, region, fp, ip):
        if not c.multi_region:
            raise ValueError(f"vertices {c.name}: the codelet takes one region per vertex (region= is for "
                             f"multi-region codelets)")
        if region.shape != tiles.shape or region.size and (region[0] != 0 or np.any(region < 0)):
            raise ValueError(f"vertices {c.name}: region must give every row its place in its vertex, starting at 0")
        cont = np.flatnonzero(region[1:] > 0) + 1
        same = (region[cont] == region[cont - 1] + 1) & (tiles[cont] == tiles[cont - 1])
        same &= np.all(fp[cont] == fp[cont - 1], axis=1) & np.all(ip[cont] == ip[cont - 1], axis=1)
        if not same.all():
            raise ValueError(f"vertices {c.name}: the regions of one vertex must follow each other (0, 1, 2, ...) "
                             f"on one tile with the same parameters")
        return np.ascontiguousarray(region)

    @staticmethod
    def _params(p, names, n, dtype, cname):
        """Parameters as an (n, len(names)) array, from a dict {name: scalar or array} or an array."""
        if p is None:
            if names:
                raise ValueError(f"vertices {cname}: parameters {list(names)} are missing")
            return np.zeros((n, 0), dtype)
        if isinstance(p, dict):
            missing = [x for x in names if x not in p]
            if missing:
                raise ValueError(f"vertices {cname}: parameters {missing} are missing")
            cols = [np.broadcast_to(np.asarray(p[x], dtype), (n,)) for x in names]
            return np.ascontiguousarray(np.stack(cols, 1)) if cols else np.zeros((n, 0), dtype)
        arr = np.asarray(p, dtype)
        if arr.ndim < 2:
            arr = arr.reshape(-1, len(names)) if arr.size == n * len(names) else arr.reshape(1, -1)
        return np.ascontiguousarray(np.broadcast_to(arr, (n, len(names))))

    def _add_chunk(self, cs, c, tiles, field_vars, starts, counts, fp, ip, region=None):
        if not isinstance(cs, ComputeSet):
            raise TypeError("add_vertex needs a ComputeSet from add_compute_set")
        if c.allowed_types is not None:
            for f, v, allowed in zip(c.fields, field_vars, c.allowed_types):
                if allowed is not None and v.dtype not in allowed:
                    raise TypeError(
                        f"codelet {c.name}: field {f.name!r} cannot be {v.dtype.name}; it takes "
                        f"{', '.join(t.name for t in allowed)}"
                    )
        if not c.takes_float8:
            for f, v in zip(c.fields, field_vars):
                if v.dtype.is_float8:
                    raise TypeError(f"codelet {c.name}: field {f.name!r} is {v.dtype.name}, which it does not take; "
                                    f"convert float8 data with the pow2scale casts first")
        for j, v in enumerate(field_vars):
            if np.any(starts[:, j] < 0) or np.any(starts[:, j] + counts[:, j] > v.numel):
                raise ValueError(f"codelet {c.name}: field {c.fields[j].name!r} reaches outside {v.name!r}")
        c.check(tuple(v.dtype for v in field_vars), counts, fp, ip)
        cs.chunks.append(VertexChunk(c, tiles, field_vars, np.ascontiguousarray(starts),
                                     np.ascontiguousarray(counts), fp, ip, region))

    # -- host streams and functions ----------------------------------------------------------
    def _add_stream(self, name, shape, dtype, to_device, callback=None) -> HostStream:
        if name in self.streams:
            raise ValueError(f"a stream named {name!r} already exists")
        s = HostStream(name, tuple(int(x) for x in shape), element_type(dtype), to_device, callback)
        self.streams[name] = s
        return s

    def add_host_to_device_stream(self, name: str, shape, dtype) -> HostStream:
        return self._add_stream(name, shape, dtype, True)

    def add_device_to_host_stream(self, name: str, shape, dtype, callback=None) -> HostStream:
        """A stream to the host; with `callback`, a host callback stream (see HostStream)."""
        return self._add_stream(name, shape, dtype, False, callback)

    def add_function(self, program: Program, name: str = "") -> Function:
        if not isinstance(program, Program):
            raise TypeError("add_function takes a program")
        f = Function(program, name or f"function{len(self.functions)}")
        self.functions.append(f)
        return f

    # -- streaming memory ----------------------------------------------------------------------
    def add_remote_buffer(self, name: str, shape, dtype, entries: int = 1):
        """A buffer of `entries` tensors of `shape` and `dtype` in streaming memory (off-chip; held
        in host memory by the engine, one per replica). Programs move data with RemoteLoad /
        RemoteStore."""
        if name in self.remote_buffers:
            raise ValueError(f"a remote buffer named {name!r} already exists")
        rb = RemoteBuffer(name, tuple(int(x) for x in shape), element_type(dtype), int(entries))
        if rb.entry_bytes > self.target.max_transfer_bytes:  # an entry moves in one transfer
            raise CompileError(transfer_limit_message(rb.entry_bytes, f"an entry of remote buffer {name!r}",
                                                      self.target))
        self.remote_buffers[name] = rb
        return rb
