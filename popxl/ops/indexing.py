"""Data-dependent indexing: gather, scatter, scatter_reduce, dynamic slice / update, onehot."""

from typing import Iterable, List, Optional

import numpy as np

from popxl import dtypes
from popxl.context import op_debug_context
from popxl.tensor import Constant, Tensor, constant

from ._op_builder import single, not_a_tensor
from ._shapes import check_int, check_same_dtype, normalize_axis

__all__ = ["gather", "tied_gather", "groupedgather", "scatter", "scatter_reduce", "grouped_scatter_reduce",
           "dynamic_slice", "dynamic_update", "dynamic_update_", "onehot"]

SCATTER_REDUCTIONS = ("sum", "max", "min", "mul", "none")


def _tensor(op: str, t, what: str = "t") -> Tensor:
    if not isinstance(t, Tensor):
        raise not_a_tensor(what, t, op)
    return t


def _indices(op: str, indices) -> Tensor:
    """Index tensors may be given as host data; it becomes an int32 constant."""
    if not isinstance(indices, Tensor):
        indices = constant(indices, dtypes.int32, "indices")
    check_int(op, indices)
    return indices


def _gather(op_type: str, t: Tensor, indices, axis: int, amp: Optional[float], zero_OOR: bool) -> Tensor:
    _tensor(op_type, t)
    indices = _indices(op_type, indices)
    axis = normalize_axis(axis, t.rank)
    shape = t.shape[:axis] + indices.shape + t.shape[axis + 1:]
    attrs = {"axis": axis, "available_memory_proportion": amp, "zero_OOR": bool(zero_OOR)}
    return single(op_type, [t, indices], shape, t.dtype, attrs, input_names=["t", "indices"])


@op_debug_context
def gather(t: Tensor, indices: Tensor, axis: int = 0, available_memory_proportion: Optional[float] = None,
           zero_OOR=False) -> Tensor:
    """Take the slices of ``t`` at ``indices`` along ``axis`` (like ``numpy.take``)."""
    return _gather("gather", t, indices, axis, available_memory_proportion, zero_OOR)


@op_debug_context
def tied_gather(t: Tensor, indices: Tensor, axis: int = 0, available_memory_proportion: Optional[float] = None,
                zero_OOR: bool = False) -> Tensor:
    """``gather`` whose weight layout is left to a matmul sharing ``t`` (same result)."""
    return _gather("tied_gather", t, indices, axis, available_memory_proportion, zero_OOR)


@op_debug_context
def groupedgather(t: Tensor, indices: Tensor, axis: int = 0, group_size: Optional[int] = 1,
                  available_memory_proportion: Optional[float] = None, zero_OOR=False) -> Tensor:
    """A gather per group: axis 0 of ``t`` and ``indices`` is the group axis (of ``group_size``
    entries); ``axis`` counts the axes of ``t`` after the group axis."""
    _tensor("groupedgather", t)
    indices = _indices("groupedgather", indices)
    if t.rank < 2 or indices.rank < 1:
        raise ValueError("groupedgather: t needs a group axis and at least one data axis.")
    group_size = int(group_size or 1)
    if t.shape[0] != group_size or indices.shape[0] != group_size:
        raise ValueError(f"groupedgather: axis 0 of t {t.shape} and indices {indices.shape} must equal "
                         f"group_size={group_size}.")
    data_axis = normalize_axis(axis, t.rank - 1) + 1
    shape = t.shape[:data_axis] + indices.shape[1:] + t.shape[data_axis + 1:]
    attrs = {"axis": data_axis, "group_size": group_size, "available_memory_proportion": available_memory_proportion,
             "zero_OOR": bool(zero_OOR)}
    return single("grouped_gather", [t, indices], shape, t.dtype, attrs, input_names=["t", "indices"])


@op_debug_context
def scatter(t: Tensor, indices: Tensor, values: Tensor, axis: int = 0,
            available_memory_proportion: Optional[float] = None) -> Tensor:
    """A copy of ``t`` where ``out[..., indices[i, j], ...] = values[i, j]`` along ``axis``
    (ONNX ScatterElements: ``indices`` and ``values`` have one shape, of ``t``'s rank)."""
    _tensor("scatter", t)
    indices = _indices("scatter", indices)
    if not isinstance(values, Tensor):
        values = constant(values, t.dtype, "values")
    check_same_dtype("scatter", t, values)
    axis = normalize_axis(axis, t.rank)
    if indices.shape != values.shape or indices.rank != t.rank:
        raise ValueError(f"scatter: indices {indices.shape} and values {values.shape} must have the same "
                         f"shape, of the rank of t {t.shape}.")
    return single("scatter", [t, indices, values], t.shape, t.dtype,
                  {"axis": axis, "available_memory_proportion": available_memory_proportion},
                  input_names=["t", "indices", "values"])


def _scatter_reduce(data: Tensor, indices, reduction: str, initial_values: Optional[Tensor], axis: int,
                    axis_size: Optional[int], group_size: int, enable_index_broadcast: int,
                    amp: Optional[float]) -> Tensor:
    op = "scatter_reduce" if group_size == 1 else "grouped_scatter_reduce"
    _tensor(op, data, "data")
    indices = _indices(op, indices)
    if reduction not in SCATTER_REDUCTIONS:
        raise ValueError(f"{op}: reduction must be one of {SCATTER_REDUCTIONS}, not {reduction!r}.")
    axis = normalize_axis(axis, data.rank)
    if indices.shape != data.shape:
        bcast_ok = enable_index_broadcast and indices.rank == 1 and indices.shape[0] == data.shape[axis]
        if not bcast_ok:
            raise ValueError(f"{op}: indices of shape {indices.shape} must match data {data.shape}"
                             + (" or be 1-D with the size of the reduced axis" if enable_index_broadcast else "")
                             + ".")
    if initial_values is not None:
        _tensor(op, initial_values, "initial_values")
        check_same_dtype(op, data, initial_values)
        shape = initial_values.shape
        if axis_size is not None and shape[axis] != int(axis_size):
            raise ValueError(f"{op}: axis_size {axis_size} differs from initial_values' axis {axis} ({shape[axis]}).")
        expected = data.shape[:axis] + (shape[axis],) + data.shape[axis + 1:]
        if shape != expected:
            raise ValueError(f"{op}: initial_values must have shape {expected}, got {shape}.")
    else:
        if axis_size is None:
            raise ValueError(f"{op}: axis_size is required when initial_values is not given.")
        shape = data.shape[:axis] + (int(axis_size),) + data.shape[axis + 1:]
    inputs = [data, indices] + ([initial_values] if initial_values is not None else [])
    names = ["data", "indices"] + (["initial_values"] if initial_values is not None else [])
    attrs = {"reduction": reduction, "axis": axis, "axis_size": shape[axis], "group_size": group_size,
             "enable_index_broadcast": bool(enable_index_broadcast), "available_memory_proportion": amp,
             "input_names": tuple(names)}
    return single(op, inputs, shape, data.dtype, attrs, input_names=names)


@op_debug_context
def scatter_reduce(data: Tensor, indices: Tensor, reduction: str, initial_values: Optional[Tensor] = None,
                   axis: int = 0, axis_size: Optional[int] = None, enable_index_broadcast: int = True,
                   available_memory_proportion: Optional[float] = None) -> Tensor:
    """Reduce (``sum``, ``max``, ``min``, ``mul`` or ``none``) the slices of ``data`` into the
    positions ``indices`` of an output with ``axis_size`` entries along ``axis``."""
    return _scatter_reduce(data, indices, reduction, initial_values, axis, axis_size, 1,
                           enable_index_broadcast, available_memory_proportion)


@op_debug_context
def grouped_scatter_reduce(data: Tensor, indices: Tensor, reduction: str, initial_values: Optional[Tensor] = None,
                           axis: int = 0, axis_size: Optional[int] = None, group_size: int = 1,
                           enable_index_broadcast: bool = True,
                           available_memory_proportion: Optional[float] = None) -> Tensor:
    """``scatter_reduce`` done independently for each of ``group_size`` groups along axis 0."""
    group_size = int(group_size)
    if data.shape[:1] != (group_size,):
        raise ValueError(f"grouped_scatter_reduce: axis 0 of data {data.shape} must equal group_size={group_size}.")
    return _scatter_reduce(data, indices, reduction, initial_values, axis, axis_size, group_size,
                           enable_index_broadcast, available_memory_proportion)


def _dynamic_check(op: str, t: Tensor, index, axes, sizes):
    _tensor(op, t)
    index = _indices(op, index)
    axes = [normalize_axis(a, t.rank) for a in axes]
    sizes = [int(s) for s in sizes]
    if len(axes) != len(sizes):
        raise ValueError(f"{op}: {len(axes)} axes but {len(sizes)} sizes.")
    if len(set(axes)) != len(axes):
        raise ValueError(f"{op}: repeated axis in {axes}.")
    # popops dynamicSlice / dynamicUpdate (PopART checks nothing): offset.dim(0) must equal the number
    # of axes and the offset may have a second dimension; each axis then reads its row's single offset
    if not (index.rank in (1, 2) and index.shape[0] == len(axes) and (index.rank == 1 or index.shape[1] == 1)):
        raise ValueError(f"{op}: the index tensor must have shape ({len(axes)},) or ({len(axes)}, 1) (one offset "
                         f"per axis of {list(axes)}), got {index.shape}.")
    for a, s in zip(axes, sizes):
        if not 0 <= s <= t.shape[a]:
            raise ValueError(f"{op}: size {s} of axis {a} must be between 0 and {t.shape[a]}.")
    shape = list(t.shape)
    for a, s in zip(axes, sizes):
        shape[a] = s
    return index, tuple(axes), tuple(sizes), tuple(shape)


@op_debug_context
def dynamic_slice(t: Tensor, index: Tensor, axes: List[int], sizes: List[int], no_overlap: bool) -> Tensor:
    """The slice of ``sizes`` along ``axes`` starting at the run-time offsets ``index``."""
    index, axes, sizes, shape = _dynamic_check("dynamic_slice", t, index, axes, sizes)
    return single("dynamic_slice", [t, index], shape, t.dtype,
                  {"axes": axes, "sizes": sizes, "no_overlap": bool(no_overlap)}, input_names=["t", "index"])


def _dynamic_update(t: Tensor, index, t_update: Tensor, axes, sizes, no_overlap: bool, inplace: bool) -> Tensor:
    index, axes, sizes, shape = _dynamic_check("dynamic_update", t, index, axes, sizes)
    _tensor("dynamic_update", t_update, "t_update")
    check_same_dtype("dynamic_update", t, t_update)
    if t_update.shape != shape:
        raise ValueError(f"dynamic_update: t_update has shape {t_update.shape}, expected the slice shape {shape}.")
    attrs = {"axes": axes, "sizes": sizes, "no_overlap": bool(no_overlap)}
    names = ["t", "index", "t_update"]
    if inplace:
        return single("dynamic_update", [t, index, t_update], t.shape, t.dtype, attrs, input_names=names,
                      modified=(0,), aliases={0: 0}, out_names=["dynamic_update_inplace_out"])
    return single("dynamic_update", [t, index, t_update], t.shape, t.dtype, attrs, input_names=names)


@op_debug_context
def dynamic_update(t: Tensor, index: Tensor, t_update: Tensor, axes: Iterable[int], sizes: Iterable[int],
                   no_overlap: bool) -> Tensor:
    """A copy of ``t`` with the slice at run-time offsets ``index`` replaced by ``t_update``."""
    return _dynamic_update(t, index, t_update, axes, sizes, no_overlap, False)


@op_debug_context
def dynamic_update_(t: Tensor, index: Tensor, t_update: Tensor, axes: Iterable[int], sizes: Iterable[int],
                    no_overlap: bool) -> Tensor:
    """``dynamic_update`` writing into ``t`` in place."""
    return _dynamic_update(t, index, t_update, axes, sizes, no_overlap, True)


@op_debug_context
def onehot(t: Tensor, num_classes: Tensor, values: Tensor, axis: int) -> Tensor:
    """One-hot encode the integer tensor ``t``: a new axis ``axis`` of ``num_classes`` entries holding
    ``values[1]`` at each index and ``values[0]`` elsewhere.

    ``num_classes`` must be known when the graph is built (a constant tensor or an int); it is
    recorded in ``attrs['num_classes']`` and is not an input of the op.
    """
    _tensor("onehot", t)
    check_int("onehot", t, "the input")
    if isinstance(num_classes, Constant):
        if num_classes.nelms != 1:
            raise ValueError(f"onehot: num_classes must be a scalar, got shape {num_classes.shape}.")
        depth = int(np.asarray(num_classes._data).reshape(()))
    elif isinstance(num_classes, Tensor):
        raise ValueError("onehot: num_classes must be a constant tensor (its value fixes the output shape).")
    else:
        depth = int(num_classes)
    if depth < 1:
        raise ValueError(f"onehot: num_classes must be >= 1, got {depth}.")
    if not isinstance(values, Tensor):
        values = constant(values, dtypes.float32, "values")
    if values.shape != (2,):
        raise ValueError(f"onehot: values must have shape (2,) (off value, on value), got {values.shape}.")
    axis = normalize_axis(axis, t.rank + 1)
    shape = t.shape[:axis] + (depth,) + t.shape[axis:]
    return single("onehot", [t, values], shape, values.dtype, {"num_classes": depth, "axis": axis},
                  input_names=["t", "values"])
