"""Helpers shared by the op functions (the names PopXL exposes in ``popxl.ops.utils``)."""
from typing import List, Optional

from popxl.dtypes import dtype
from popxl.graph import Graph
from popxl.tensor import Tensor

from ._op_builder import _check_placement, _not_in_graph_error

__all__ = ["cast_if_needed", "check_in_graph", "check_tensor_ipu_and_tile_set", "handle_negative_axis",
           "convert_optional_float", "convert_optional_int", "convert_optional_dtype",
           "convert_optional_int64_list"]


def cast_if_needed(t: Tensor, data_type: dtype) -> Tensor:
    """``t`` if it already has ``data_type``, else ``ops.cast(t, data_type)``."""
    from .misc import cast
    return t if t.dtype == data_type else cast(t, data_type)


def check_in_graph(graph: Graph, *args, **tensors: Tensor):
    """Raise TypeError if a value is not a tensor, ValueError if a tensor is not in ``graph``.

    Pass the tensors as keyword arguments so the error can name them.
    """
    if args:
        raise TypeError("Internal error: pass the tensors to check_in_graph as keyword arguments.")
    for name, t in tensors.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"The input `{name}` is not a Tensor. Type: {type(t)}. Value: {t!r}.")
        if t.graph is not graph:
            raise _not_in_graph_error(name, t, graph)


def check_tensor_ipu_and_tile_set(*args, **tensors: Tensor):
    """Raise ValueError if the tensors are placed on different IPUs or tile sets."""
    if args:
        raise TypeError("Internal error: pass the tensors as keyword arguments.")
    _check_placement(list(tensors.values()), list(tensors))


def handle_negative_axis(t: Tensor, axis: int) -> int:
    return len(t.shape) + axis if axis < 0 else axis


def convert_optional_float(v: Optional[float]):
    return None if v is None else float(v)


def convert_optional_int(v: Optional[int]):
    return None if v is None else int(v)


def convert_optional_dtype(dt: Optional[dtype]):
    return None if dt is None else dtype.as_dtype(dt)


def convert_optional_int64_list(l: Optional[List[int]]):  # noqa: E741 (the SDK's parameter name)
    return None if l is None else [int(x) for x in l]
