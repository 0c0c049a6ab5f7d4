"""Tensors of the IR: intermediates, variables, constants and graph inputs.

A tensor belongs to exactly one graph; ops can only combine tensors of the graph they are created
in. Variables and constants keep their initial host data (a C-ordered NumPy array owned by the
tensor, in the tensor's dtype) in ``_data`` for the Session to upload.
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Iterable, List, Literal, Optional, Self, Tuple, Type, TypeVar, Union

import numpy as np

from popxl import dtypes
from popxl.context import gcg
from popxl.errors import UndefinedValue
from popxl.replica_grouping import ReplicaGrouping
from popxl.tensorlocation import ReplicatedTensorSharding, TensorLocation, TensorStorage
from popxl.typing_ import NewAliasAnnotation
from popxl.utils import to_numpy

if TYPE_CHECKING:
    from popxl.graph import Graph
    from popxl.ir import Ir
    from popxl.op import Op
    from popxl.remote_buffer import RemoteBuffer

__all__ = [
    "ScalarType", "HostTensor", "HostScalarTensor", "TensorLike", "TensorSpec", "Tensor", "Variable",
    "Constant", "TensorByRef", "variable", "constant", "graph_input", "graph_output", "remote_variable",
    "remote_replica_sharded_variable", "replica_sharded_buffer", "replica_sharded_variable",
]

ScalarType = Union[int, float, bool]
"""Scalar types that can be turned into a constant tensor."""
HostTensor = Union[np.ndarray, Iterable[ScalarType]]
"""Containers that can be turned into a constant tensor."""
HostScalarTensor = Union[ScalarType, HostTensor]
TensorLike = Union["Tensor", HostScalarTensor]
"""Tensors, and values that can be turned into a constant tensor."""
host_tensor_types = (np.ndarray, list, tuple)



class TensorSpec(Mapping):
    """Shape, dtype and meta shape of a tensor, without the tensor.

    Can stand in for a tensor in ``Ir.create_graph`` arguments.
    """

    def __init__(self, shape: Tuple[int, ...], dtype: dtypes.dtype, meta_shape: Tuple[int, ...] = ()):
        self.shape = tuple(int(s) for s in shape)
        self.dtype = dtypes.dtype.as_dtype(dtype)
        self.meta_shape = tuple(int(s) for s in meta_shape) if meta_shape else ()

    def to_dict(self):
        return {"shape": self.shape, "dtype": self.dtype, "meta_shape": self.meta_shape}

    def to_tuple(self):
        return self.shape, self.dtype, self.meta_shape

    def __iter__(self):
        return iter(self.to_dict())

    def __len__(self):
        return 3

    def __getitem__(self, key):
        return self.to_dict()[key]

    def __eq__(self, other):
        return isinstance(other, TensorSpec) and self.to_tuple() == other.to_tuple()

    def __hash__(self) -> int:
        return hash(self.to_tuple())

    def __repr__(self) -> str:
        return f"TensorSpec(shape={self.shape}, dtype={self.dtype}, meta_shape={self.meta_shape})"


class Tensor:
    """A tensor of a graph. Created by ops, ``popxl.variable``, ``popxl.constant`` and
    ``popxl.graph_input``; never constructed directly.

    Hash and ``==`` are by identity (tensor id and Ir), so tensors can be dict keys; use
    ``ops.equal`` for element-wise comparison.
    """

    # set by _create (the constructor is closed to users)
    _graph: "Graph"
    _id: str
    _shape: Tuple[int, ...]
    _dtype: dtypes.dtype
    _meta_shape: Tuple[int, ...]
    _producer: Optional["Op"]  # None for variables, constants, graph inputs (and disconnected outputs)
    _consumers: List["Op"]
    _ipu: Optional[int]
    _tile_set: Optional[str]
    _in_sync_with_ipu: bool

    def __init__(self):
        raise RuntimeError("popxl.Tensor cannot be constructed directly.")

    @classmethod
    def _create(cls, graph: "Graph", tensor_id: str, shape: Iterable[int], dtype: dtypes.dtype,
                meta_shape: Iterable[int] = (), producer: Optional["Op"] = None,
                ipu: Optional[int] = None, tile_set: Optional[str] = None) -> Self:
        self = object.__new__(cls)
        self._graph = graph
        self._id = tensor_id
        self._shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in self._shape):
            raise ValueError(f"Tensor shape cannot have negative dimensions: {self._shape}.")
        self._dtype = dtypes.dtype.as_dtype(dtype)
        self._meta_shape = tuple(int(s) for s in meta_shape) if meta_shape else ()
        self._producer = producer
        self._consumers = []
        self._ipu = ipu
        self._tile_set = tile_set
        self._in_sync_with_ipu = True
        graph._add_tensor(self)
        return self

    # -- PopART's internal tensor ---------------------------------------------------------------
    @property
    def _pb_tensor(self):
        """This tensor as PopART's `_ir.Tensor`: a view of it (popxl/_pb)."""
        view = self.__dict__.get("_pb_view")
        if view is None:
            from popxl._pb.views import Tensor as PbTensor
            view = self._pb_view = PbTensor(self)
        return view

    @classmethod
    def _from_pb_tensor(cls, pb_tensor) -> "Tensor":
        """The popxl Tensor of an `_ir.Tensor` view."""
        t = getattr(pb_tensor, "_t", None)
        if not isinstance(t, Tensor):
            raise TypeError(f"Tensor._from_pb_tensor takes an _ir.Tensor, not {type(pb_tensor).__name__}")
        return t

    # -- identity -------------------------------------------------------------------------------
    @property
    def id(self) -> str:
        """Identifier unique in the Ir: the graph scope, name scopes and name (``'g_0/a/x'``)."""
        return self._id

    @property
    def name(self) -> str:
        """The id without the graph scope (name scopes included)."""
        scope = self._graph._scope_prefix
        return self._id[len(scope):] if scope and self._id.startswith(scope) else self._id

    @property
    def scope(self) -> str:
        """The graph scope of the tensor ("" for the main graph)."""
        return self._graph.name

    @property
    def graph(self) -> "Graph":
        return self._graph

    @property
    def ir(self) -> "Ir":
        return self._graph.ir

    @property
    def producer(self) -> Optional["Op"]:
        """The op that computes this tensor, or None for variables, constants and graph inputs."""
        return self._producer

    @property
    def consumers(self) -> Tuple["Op", ...]:
        """The ops that read this tensor, in creation order."""
        return tuple(self._consumers)

    def _add_consumer(self, op: "Op") -> None:
        self._consumers.append(op)

    def _remove_consumer(self, op: "Op") -> None:
        self._consumers.remove(op)

    def _producer_op(self) -> "Op":
        """The producer of a tensor an op computed (for the transforms, which only ask it of such)."""
        if self._producer is None:
            raise RuntimeError(f"Internal error: {self._id} has no producer (an op output was expected).")
        return self._producer

    def _set_producer(self, op: Optional["Op"]) -> None:
        """The op that computes this tensor (None: disconnected, as PopART's disconnectOutTensor)."""
        self._producer = op

    def _set_tile_set(self, tile_set: Optional[str]) -> None:
        """The tile set the tensor lives on ("compute" / "io")."""
        self._tile_set = tile_set

    def _set_ipu(self, ipu: Optional[int]) -> None:
        """The IPU the tensor lives on (ops that move data between IPUs set their outputs')."""
        self._ipu = ipu

    # -- type and shape -------------------------------------------------------------------------
    @property
    def dtype(self) -> dtypes.dtype:
        return self._dtype

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._shape

    @property
    def meta_shape(self) -> Tuple[int, ...]:
        """Shape of the full tensor when this one is a replica shard (``()`` otherwise)."""
        return self._meta_shape

    @property
    def spec(self) -> TensorSpec:
        return TensorSpec(self._shape, self._dtype, self._meta_shape)

    @property
    def rank(self) -> int:
        return len(self._shape)

    @property
    def nelms(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def location_info(self) -> TensorLocation:
        return getattr(self, "_location", TensorLocation())

    def strides(self, shape=None) -> Tuple[int, ...]:
        """Bytes to step along each axis in row-major order (as NumPy's ``strides``)."""
        shape = self._shape if shape is None else tuple(shape)
        out, step = [], self._dtype.itemsize
        for s in reversed(shape):
            out.append(step)
            step *= s
        return tuple(reversed(out))

    # -- placement --------------------------------------------------------------------------------
    def _get_ipu_and_tile_set(self, raise_on_undefined_tile_set: bool = True,
                              raise_on_undefined_ipu: bool = True):
        ipu, tile_set = self._ipu, self._tile_set
        if ipu is None or tile_set is None:
            for op in self._consumers:
                ipu = op.ipu if ipu is None else ipu
                tile_set = op.tile_set if tile_set is None else tile_set
                break
        if raise_on_undefined_ipu and ipu is None:
            raise UndefinedValue(f"The IPU of tensor {self.id} is undefined.")
        if raise_on_undefined_tile_set and tile_set is None:
            raise UndefinedValue(f"The tile set of tensor {self.id} is undefined.")
        return ipu, tile_set if tile_set is not None else "undefined"

    @property
    def ipu(self) -> int:
        """The IPU the tensor is on. Raises UndefinedValue if nothing placed it yet."""
        return self._get_ipu_and_tile_set(False, True)[0]

    @property
    def tile_set(self) -> Literal["compute", "io"]:
        """``'compute'`` or ``'io'``. Raises UndefinedValue if nothing placed it yet."""
        return self._get_ipu_and_tile_set(True, False)[1]

    @property
    def in_sync_with_ipu(self) -> bool:
        """For variables: whether the host copy equals the device copy."""
        return self._in_sync_with_ipu

    # -- methods ------------------------------------------------------------------------------
    @property
    def T(self) -> "Tensor":
        """The tensor with its axes reversed."""
        return self.transpose()

    @property
    def T_(self) -> "Tensor":
        """The tensor with its axes reversed (in-place view)."""
        return self.transpose_()

    def transpose(self, permutation: Optional[Iterable[int]] = None) -> "Tensor":
        import popxl.ops as ops
        return ops.transpose(self, permutation)

    def transpose_(self, permutation: Optional[Iterable[int]] = None) -> "Tensor":
        import popxl.ops as ops
        return ops.transpose_(self, permutation)

    def reshape(self, shape: Iterable[int]) -> "Tensor":
        import popxl.ops as ops
        return ops.reshape(self, shape)

    def reshape_(self, shape: Iterable[int]) -> "Tensor":
        import popxl.ops as ops
        return ops.reshape_(self, shape)

    def flatten(self) -> "Tensor":
        import popxl.ops as ops
        return ops.flatten(self)

    def flatten_(self) -> "Tensor":
        import popxl.ops as ops
        return ops.flatten_(self)

    def detach(self) -> "Tensor":
        import popxl.ops as ops
        return ops.detach(self)

    def detach_(self) -> "Tensor":
        import popxl.ops as ops
        return ops.detach_(self)

    def diag(self) -> "Tensor":
        """The diagonal of a 2-D tensor as a 1-D tensor of min(rows, columns) elements.

        Raises:
            ValueError: if the tensor is not 2-dimensional.
        """
        import popxl.ops as ops
        if self.rank != 2:
            raise ValueError(f"Tensor.diag takes a 2-dimensional tensor; {self.id} has rank {self.rank} "
                             f"(shape {self.shape}).")
        rows, cols = self.shape
        k = min(rows, cols)
        # element (i, i) is flat element i * (cols + 1): a strided slice of the flat view
        return ops.slice(ops.flatten(self), start=[0], stop=[max(0, (k - 1) * (cols + 1) + 1)], step=[cols + 1])

    def copy_to_ipu(self, destination: int, source: Optional[int] = None) -> "Tensor":
        import popxl.ops as ops
        return ops.ipu_copy(self, destination, source)

    def _ensure_tensor(self, value: TensorLike, dtype: Optional[dtypes.dtype] = None,
                       raise_on_empty: bool = True) -> "Tensor":
        """Return ``value`` if it is a tensor, else a constant of it with this tensor's dtype."""
        if isinstance(value, Tensor):
            return value
        t = constant(value, self._dtype if dtype is None else dtype)
        if raise_on_empty and t.nelms == 0:
            raise ValueError(
                "The value has 0 elements - this is most likely a mistake. If not, create the tensor "
                f"explicitly before using it in an op. Type: {type(value)}. Value: {value!r}")
        return t

    # -- dunders --------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"Tensor[{self._id} {self._dtype} {self._shape}]"

    def __hash__(self):
        return hash((self._id, id(self._graph.ir)))

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, Tensor) and self._id == other._id and self._graph.ir is other._graph.ir

    def __ne__(self, other: Any) -> bool:
        return not self.__eq__(other)

    def __len__(self) -> int:
        if self._shape:
            return self._shape[0]
        raise ValueError("Tensor is a scalar and doesn't have a length.")

    def __add__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.add(self, self._ensure_tensor(other))

    def __radd__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.add(self._ensure_tensor(other), self)

    def __iadd__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        ops.add_(self, self._ensure_tensor(other))
        return self

    def __sub__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.sub(self, self._ensure_tensor(other))

    def __rsub__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.sub(self._ensure_tensor(other), self)

    def __mul__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.mul(self, self._ensure_tensor(other))

    def __rmul__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.mul(self._ensure_tensor(other), self)

    def __truediv__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.div(self, self._ensure_tensor(other))

    def __rtruediv__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.div(self._ensure_tensor(other), self)

    def __mod__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.fmod(self, self._ensure_tensor(other))

    def __rmod__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.fmod(self._ensure_tensor(other), self)

    def __pow__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.pow(self, self._ensure_tensor(other))

    def __rpow__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.pow(self._ensure_tensor(other), self)

    def __neg__(self) -> "Tensor":
        import popxl.ops as ops
        return ops.negate(self)

    def __matmul__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.matmul(self, self._ensure_tensor(other))

    def __rmatmul__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.matmul(self._ensure_tensor(other), self)

    def __and__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.logical_and(self, self._ensure_tensor(other))

    def __rand__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.logical_and(self._ensure_tensor(other), self)

    def __or__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.logical_or(self, self._ensure_tensor(other))

    def __ror__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.logical_or(self._ensure_tensor(other), self)

    def __invert__(self) -> "Tensor":
        import popxl.ops as ops
        return ops.logical_not(self)

    def __gt__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.greater(self, self._ensure_tensor(other))

    def __lt__(self, other: TensorLike) -> "Tensor":
        import popxl.ops as ops
        return ops.greater(self._ensure_tensor(other), self)

    def __getitem__(self, key) -> "Tensor":
        """Slicing (ints and slices, NumPy rules; int indices drop their axis), integer indexing
        (an int tensor or host array: ``ops.gather`` on axis 0) and boolean masking (a bool
        tensor or host array: elements where the mask is False become 0, the shape is kept)."""
        import popxl.ops as ops

        if isinstance(key, (bool, str)) or key is None or key is Ellipsis or (
                isinstance(key, tuple) and any(k is None or k is Ellipsis or isinstance(k, (str, Tensor))
                                               for k in key)):
            pass  # the TypeError below (a tuple holding these is not host index data either)
        elif isinstance(key, (slice, int, np.integer)) or (
                isinstance(key, tuple) and all(isinstance(k, (slice, int, np.integer)) for k in key)
                and not any(isinstance(k, bool) for k in key)):
            key = key if isinstance(key, tuple) else (key,)
            if len(key) > self.rank:
                raise IndexError(f"Too many indices for tensor of rank {self.rank}: {len(key)}.")
            start, stop, step, squeeze_axes = [], [], [], []
            for axis, k in enumerate(key):
                if isinstance(k, slice):
                    start.append(k.start)
                    stop.append(k.stop)
                    step.append(k.step)
                    continue
                k = int(k)
                dim = self._shape[axis]
                if not -dim <= k < dim:
                    raise IndexError(f"Index {k} is out of bounds for axis {axis} with size {dim}.")
                k = k + dim if k < 0 else k
                start.append(k)
                stop.append(k + 1)
                step.append(1)
                squeeze_axes.append(axis)
            out = ops.slice(self, start, stop, step)
            if squeeze_axes:
                out = ops.squeeze(out, axes=squeeze_axes)
            return out
        elif isinstance(key, Tensor) or isinstance(key, host_tensor_types):
            key_t = key if isinstance(key, Tensor) else constant(key)
            if key_t.dtype.is_int:
                return ops.gather(self, key_t)
            if key_t.dtype == dtypes.bool:
                if key_t.rank < self.rank:  # a mask over the leading axes applies to whole rows
                    key_t = ops.reshape(key_t, key_t.shape + (1,) * (self.rank - key_t.rank))
                return ops.where(key_t, self, constant(0, self._dtype))
        raise TypeError("Only integers, slices (`:`), integer tensors and boolean tensors are valid "
                        f"indices. Not a valid index: {key!r} (type {type(key)}).")

    # No fallback of iteration / `in` to __getitem__, and NumPy defers to our reflected operators.
    __iter__ = None
    __contains__ = None
    __array_ufunc__ = None


class Variable(Tensor):
    """A tensor whose value persists between runs (weights, optimiser state). Main graph only."""

    # set where the variable is made (variable, remote_variable, replica_sharded_variable, ...)
    _data: np.ndarray
    _replica_grouping: ReplicaGrouping
    _retrieval_mode: Literal["one_per_group", "all_replicas"]
    _location: "TensorLocation"
    _remote_buffer: Optional["RemoteBuffer"] = None  # the RemoteBuffer of a remote variable
    _remote_offset = 0
    _remote_rts = False  # a remote replica-sharded variable
    _shard_over: Optional[int] = None  # replica-sharded: the number of shards
    _rts_shard: Optional[Tensor] = None  # replica-sharded: the rts_shard op's output, the shard the ops use

    def _replica_sharded(self, shard_over: int, shard: Optional[Tensor] = None) -> None:
        """Mark the variable as sharded over `shard_over` replicas (replica_sharded_variable)."""
        self._location = TensorLocation(TensorStorage.OffChip, ReplicatedTensorSharding.On)
        self._shard_over = shard_over
        if shard is not None:
            self._rts_shard = shard

    # PopXL's signature: a variable / constant is on no IPU until copied, so the source is required
    def copy_to_ipu(self, dst: int, src: int) -> "Tensor":  # type: ignore[override]
        import popxl.ops as ops
        return ops.ipu_copy(self, dst, src)

    @property
    def replica_grouping(self) -> ReplicaGrouping:
        return self._replica_grouping

    @property
    def retrieval_mode(self) -> Literal["one_per_group", "all_replicas"]:
        return self._retrieval_mode

    @property
    def shape_on_replica(self) -> Tuple[int, ...]:
        """The shape of the variable on one replica (the tensor shape)."""
        return self._shape

    @property
    def shape_on_host(self) -> Tuple[int, ...]:
        """The shape of the variable's host data: a leading group axis when there are several groups."""
        groups = self._replica_grouping.num_groups
        return ((groups,) + self._shape) if groups > 1 else self._shape


class Constant(Tensor):
    """A tensor with a value fixed when the IR is built."""

    _data: np.ndarray

    # PopXL's signature: a variable / constant is on no IPU until copied, so the source is required
    def copy_to_ipu(self, dst: int, src: int) -> "Tensor":  # type: ignore[override]
        import popxl.ops as ops
        return ops.ipu_copy(self, dst, src)


_Leaf = TypeVar("_Leaf", bound=Tensor)


def _new_leaf(cls: Type[_Leaf], g: "Graph", name: Optional[str], shape, dtype, meta_shape=()) -> _Leaf:
    return cls._create(g, g._create_tensor_id(name), shape, dtype, meta_shape)


def variable(data: HostScalarTensor, dtype: Optional[dtypes.dtype] = None, name: Optional[str] = None,
             downcast: bool = True, replica_grouping: Optional[ReplicaGrouping] = None,
             retrieval_mode: Optional[Literal["one_per_group", "all_replicas"]] = None,
             log2_scale: Optional[int] = None, nan_on_overflow: Optional[bool] = None) -> Variable:
    """Create a variable initialised with ``data`` in the main graph.

    Without ``dtype`` the dtype is NumPy's, with 64-bit types narrowed to 32 bits when ``downcast``.

    Raises:
        ValueError: if the current graph is not the main graph.
    """
    g = gcg()
    if g is not g.ir.main_graph:
        raise ValueError(
            "You cannot create a variable tensor in a subgraph (current graph: "
            f"{g._label}). Variables can only live in the main graph: create the variable there and "
            "pass it to this graph as a graph input (`popxl.graph_input`), or use a constant "
            "(`popxl.constant`).")
    if replica_grouping is None:
        replica_grouping = g.ir.replica_grouping()
    np_data: np.ndarray
    if isinstance(data, np.memmap):
        np_data = _memmap_data(data, dtype, replica_grouping)
    else:
        np_data = to_numpy(data, dtype, downcast, copy=True, log2_scale=log2_scale,
                           nan_on_overflow=nan_on_overflow)
    if retrieval_mode is None:
        retrieval_mode = "one_per_group"
    if retrieval_mode not in ("one_per_group", "all_replicas"):
        raise ValueError(f"retrieval_mode must be 'one_per_group' or 'all_replicas', not {retrieval_mode!r}.")
    shape = np_data.shape
    if replica_grouping.num_groups > 1:
        if not shape or shape[0] != replica_grouping.num_groups:
            raise ValueError(f"Variable data of shape {shape} needs a leading axis of one value per replica "
                             f"group ({replica_grouping.num_groups}).")
        shape = shape[1:]
    v = _new_leaf(Variable, g, name, shape, dtypes.dtype.as_dtype(np_data.dtype))
    v._data = np_data
    v._replica_grouping = replica_grouping
    v._retrieval_mode = retrieval_mode
    v._location = TensorLocation()
    return v


def _memmap_data(data: np.memmap, dtype: Optional[dtypes.dtype], replica_grouping: ReplicaGrouping,
                 warn: bool = True) -> np.memmap:
    """A memory-mapped array is the variable's host buffer itself, not a copy: the session writes
    the device's values into it (and flushes it) at weights_to_host, as PopXL does. So it must
    already be what the device holds: PopXL's checks and words."""
    if data.dtype.itemsize == 8 and data.dtype.kind in "fiu":
        raise ValueError(f"When passing a memory-mapped NumPy array, the dtype {dtype} is not supported, as it "
                         f"requires downcasting (the array holds {data.dtype}). Store the data as a 32-bit type in the "
                         f"memmap.")
    if dtype is not None and dtypes.dtype.as_dtype(dtype).as_numpy() != data.dtype:
        raise ValueError(f"When passing a memory-mapped NumPy array, the `dtype` parameter must be None or match the "
                         f"array's dtype: got {dtype} for an array of {data.dtype}. Convert the data in the file "
                         "instead.")
    if not data.flags.c_contiguous:
        raise ValueError("When passing a memory-mapped NumPy array, it must already be in C-ordered (row-major) "
                         "layout: open the memmap with order='C'.")
    if warn and not replica_grouping.is_const:
        from popxl import _logging
        _logging.warn_popxl(f"popxl.variable: you have passed np.memmap data and the non-const replica grouping "
                            f"`{replica_grouping}`: the values read back for its groups are written into the memmap "
                            f"in group order.")
    return data


def constant(data: HostScalarTensor, dtype: Optional[dtypes.dtype] = None, name: Optional[str] = None,
             downcast: bool = True, log2_scale: Optional[int] = None,
             nan_on_overflow: Optional[bool] = None) -> Constant:
    """Create a constant tensor with value ``data`` in the current graph."""
    g = gcg()
    np_data = to_numpy(data, dtype, downcast, copy=True, log2_scale=log2_scale,
                       nan_on_overflow=nan_on_overflow)
    c = _new_leaf(Constant, g, name, np_data.shape, dtypes.dtype.as_dtype(np_data.dtype))
    c._data = np_data
    return c


def remote_variable(data: HostScalarTensor, remote_buffer: "RemoteBuffer", offset: int = 0,
                    dtype: Optional[dtypes.dtype] = None, name: Optional[str] = None, downcast: bool = True,
                    replica_grouping: Optional[ReplicaGrouping] = None,
                    retrieval_mode: Optional[Literal["one_per_group", "all_replicas"]] = "one_per_group",
                    log2_scale: Optional[int] = None, nan_on_overflow: Optional[bool] = None) -> Variable:
    """A variable whose value lives in entry ``offset`` of ``remote_buffer`` in streaming memory.

    Its data (per replica, as for ``variable``) must have the buffer's tensor shape and dtype. Ops
    can't read it directly: load it with ``ops.remote_load(remote_buffer, offset)``, update the
    loaded tensor and store it back with ``ops.remote_store``. ``Session.get_tensor_data`` and
    ``write_variable_data`` read and write the entry.

    Raises:
        TypeError: if ``remote_buffer`` is not a RemoteBuffer.
        ValueError: outside the main graph; if the data does not match the buffer; if ``offset`` is
            not an entry of the buffer or another remote variable already holds that entry.
    """
    from popxl.remote_buffer import RemoteBuffer
    from popxl.tensorlocation import TensorStorage

    if not isinstance(remote_buffer, RemoteBuffer):
        raise TypeError(f"remote_variable needs a popxl.RemoteBuffer (popxl.remote_buffer), got "
                        f"{type(remote_buffer).__name__}.")
    g = gcg()
    if isinstance(data, np.memmap):  # the memmap's own checks first (it is the variable's host buffer)
        _memmap_data(data, dtype, replica_grouping or g.ir.replica_grouping(), warn=False)
    if remote_buffer._ir is not g.ir:
        raise ValueError("The remote buffer belongs to another Ir than the current graph's.")
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
        raise TypeError(f"remote_variable: offset must be an int, got {offset!r}.")
    offset = int(offset)
    if not 0 <= offset < remote_buffer.entries:
        raise ValueError(f"remote_variable: offset {offset} is not an entry of RemoteBuffer"
                         f"[id={remote_buffer.remote_buffer_id}], which has {remote_buffer.entries} entries.")
    for other in g.ir.main_graph.variables:
        if getattr(other, "_remote_buffer", None) is remote_buffer and other._remote_offset == offset:
            raise ValueError(f"Entry {offset} of RemoteBuffer[id={remote_buffer.remote_buffer_id}] already holds "
                             f"remote variable {other.id}.")
    if g is g.ir.main_graph:  # check the data against the buffer before creating anything
        np_data = to_numpy(data, dtype, downcast, copy=False, log2_scale=log2_scale,
                           nan_on_overflow=nan_on_overflow)
        groups = (replica_grouping or g.ir.replica_grouping()).num_groups
        shape = np_data.shape[1:] if groups > 1 and np_data.ndim and np_data.shape[0] == groups else np_data.shape
        want_dt = remote_buffer.tensor_dtype
        got_dt = dtypes.dtype.as_dtype(np_data.dtype)
        if tuple(shape) != tuple(remote_buffer.tensor_shape) or got_dt != want_dt:
            raise ValueError(f"remote_variable: the data ({got_dt}, shape {tuple(shape)} per replica) does not match "
                             f"RemoteBuffer[id={remote_buffer.remote_buffer_id}] ({want_dt}, shape "
                             f"{tuple(remote_buffer.tensor_shape)}).")
    var = variable(data, dtype, name, downcast, replica_grouping, retrieval_mode, log2_scale, nan_on_overflow)
    remote_buffer.validate_tensor_matches_buffer(var)
    var._location = TensorLocation(TensorStorage.OffChip)
    var._remote_buffer = remote_buffer
    var._remote_offset = offset
    return var


def remote_replica_sharded_variable(data: HostScalarTensor, remote_buffer: "RemoteBuffer", offset: int = 0,
                                    dtype: Optional[dtypes.dtype] = None, name: Optional[str] = None,
                                    downcast: bool = True, replica_grouping: Optional[ReplicaGrouping] = None,
                                    retrieval_mode: Optional[Literal["one_per_group", "all_replicas"]] =
                                    "one_per_group", log2_scale: Optional[int] = None,
                                    nan_on_overflow: Optional[bool] = None) -> Variable:
    """A variable sharded in equal parts across replicas (replicated tensor sharding) whose shards
    live in entry ``offset`` of ``remote_buffer``: each replica's streaming memory holds its flat
    shard of ``ceil(nelms / shard_over)`` elements (the buffer's tensor shape). Load the shard with
    ``ops.remote_load`` (its meta shape is the variable's shape, so ``replicated_all_gather``
    rebuilds the whole value) and store an updated shard with ``ops.remote_store``.
    ``Session.get_tensor_data`` gathers the whole value.

    Raises:
        ValueError: if the buffer's tensor shape or dtype is not that of one shard.
    """
    from popxl._rts import shard_numel, shard_settings
    from popxl.remote_buffer import RemoteBuffer

    if not isinstance(remote_buffer, RemoteBuffer):
        raise TypeError(f"remote_replica_sharded_variable needs a popxl.RemoteBuffer, got "
                        f"{type(remote_buffer).__name__}.")
    g = gcg()
    if replica_grouping is None:
        replica_grouping = getattr(remote_buffer, "_replica_grouping", None)
    rg, so = shard_settings(g.ir, replica_grouping, getattr(remote_buffer, "_shard_over", None))
    if isinstance(data, np.memmap):  # the memmap's own checks first (it is the variable's host buffer)
        _memmap_data(data, dtype, rg, warn=False)
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)) or not 0 <= offset < remote_buffer.entries:
        raise ValueError(f"remote_replica_sharded_variable: offset {offset!r} is not an entry of RemoteBuffer"
                         f"[id={remote_buffer.remote_buffer_id}] ({remote_buffer.entries} entries).")
    np_data = to_numpy(data, dtype, downcast, copy=False, log2_scale=log2_scale, nan_on_overflow=nan_on_overflow)
    shape = np_data.shape[1:] if rg.num_groups > 1 and np_data.ndim and np_data.shape[0] == rg.num_groups \
        else np_data.shape
    m = shard_numel(int(np.prod(shape, dtype=np.int64)), so)
    got_dt = dtypes.dtype.as_dtype(np_data.dtype)
    if (tuple(remote_buffer.tensor_shape) == tuple(shape) != (m,) and not remote_buffer.meta_shape
            and remote_buffer.tensor_dtype == got_dt):
        # a buffer made with the whole value's shape (popxl.remote_buffer / RemoteBuffer rather than
        # replica_sharded_buffer): as PopXL, it holds this value's shards, so its entries are shards
        remote_buffer.set_remote_buffer_info(got_dt, (m,), remote_buffer.entries)
    if tuple(remote_buffer.tensor_shape) != (m,) or remote_buffer.tensor_dtype != got_dt:
        raise ValueError(f"remote_replica_sharded_variable: RemoteBuffer[id={remote_buffer.remote_buffer_id}] holds "
                         f"{remote_buffer.tensor_dtype} {tuple(remote_buffer.tensor_shape)}, but a shard of this "
                         f"{got_dt} variable of shape {tuple(shape)} over {so} replicas is {got_dt} ({m},).")
    var = variable(data, dtype, name, downcast, rg, retrieval_mode, log2_scale, nan_on_overflow)
    remote_buffer.meta_shape = var.shape
    var._replica_sharded(so)
    var._remote_buffer = remote_buffer
    var._remote_offset = int(offset)
    var._remote_rts = True
    return var


def replica_sharded_buffer(shape: Tuple[int, ...], dtype: dtypes.dtype,
                           replica_grouping: Optional[ReplicaGrouping] = None, shard_over: Optional[int] = None,
                           entries: int = 1, *, shard_grouping: Optional[ReplicaGrouping] = None):
    """A remote buffer for a replica-sharded variable of host shape ``shape`` (the group axis first
    when there are several groups): its entries hold one replica's flat shard,
    ``ceil(nelms / shard_over)`` elements, and its meta shape is one group's value shape.
    ``shard_over`` (default: the group size) replicas of a group share one copy of the value."""
    from popxl._rts import replica_sharded_buffer as _impl
    return _impl(shape, dtype, replica_grouping, shard_over, entries, shard_grouping)


def replica_sharded_variable(data: HostScalarTensor, dtype: Optional[dtypes.dtype] = None,
                             name: Optional[str] = None, downcast: bool = True,
                             replica_grouping: Optional[ReplicaGrouping] = None, shard_over: Optional[int] = None,
                             retrieval_mode: Optional[Literal["one_per_group", "all_replicas"]] = "one_per_group",
                             log2_scale: Optional[int] = None, nan_on_overflow: Optional[bool] = None, *,
                             shard_grouping: Optional[ReplicaGrouping] = None) -> Tuple[Variable, Tensor]:
    """A variable split in equal shards across replicas (replicated tensor sharding), and its shard.

    Returns ``(variable, shard)``: the variable holds the whole value (``Session.get_tensor_data``
    and ``write_variable_data`` read and write all of it, with a leading group axis when there are
    several groups); ``shard`` is this replica's flat piece of ``ceil(nelms / shard_over)``
    elements (meta shape: the value's shape). Ops use and update the shard;
    ``ops.collectives.replicated_all_gather(shard)`` rebuilds the whole value on every replica.
    The value is sharded over every ``shard_over`` consecutive replicas of each group (default:
    the whole group).
    """
    from popxl._rts import replica_sharded_variable as _impl
    return _impl(data, dtype, name, downcast, replica_grouping, shard_over, retrieval_mode, log2_scale,
                 nan_on_overflow, shard_grouping)


def graph_input(shape: Iterable[int], dtype: dtypes.dtype, name: Optional[str] = None, by_ref: bool = False,
                meta_shape: Optional[Iterable[int]] = None) -> Tensor:
    """Add an input to the current graph; callers pass a tensor for it at each call site.

    With ``by_ref`` changes the graph makes to the input are seen by the caller's tensor.
    """
    g = gcg()
    if g is g.ir.main_graph:
        raise ValueError("The main graph cannot have graph inputs: stream data in with "
                         "`popxl.h2d_stream` and `ops.host_load`, or use a variable.")
    t = _new_leaf(Tensor, g, name, tuple(shape), dtypes.dtype.as_dtype(dtype), meta_shape or ())
    g._add_input(t, by_ref)
    return t


def graph_output(t: Tensor) -> None:
    """Mark ``t`` (a tensor of the current graph) as the graph's next output."""
    g = gcg()
    from popxl.ops.utils import check_in_graph
    check_in_graph(g, t=t)
    if g is g.ir.main_graph:
        raise ValueError("The main graph cannot have graph outputs: stream data out with "
                         "`popxl.d2h_stream` and `ops.host_store`.")
    g._add_output(t)


TensorByRef = NewAliasAnnotation("TensorByRef", Tensor)
"""Annotate a parameter of a graph function with ``TensorByRef`` (or ``List[TensorByRef]``) to make
the corresponding graph inputs pass-by-reference: changes made to them in the graph are seen by
the caller's tensors."""
