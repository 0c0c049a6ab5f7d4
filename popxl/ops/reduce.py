"""Reductions over axes (one rule table), arg-reductions, cumsum and topk."""

from typing import Iterable, Optional, Tuple, Union

from popxl import dtypes
from popxl.context import op_debug_context
from popxl.tensor import Tensor

from ._op_builder import create_op, single, not_a_tensor
from ._shapes import check_numeric, normalize_axes, normalize_axis, reduced_shape

__all__ = ["sum", "mean", "max", "min", "prod", "logsum", "logsumexp", "l1", "l2", "sumsquare", "median",
           "argmax", "argmin", "cumsum", "topk"]

Axis = Optional[Union[int, Iterable[int]]]

# Every reduction keeps the input dtype. "median" also outputs the (int32) index of each median.
REDUCE_OPS = ("sum", "mean", "max", "min", "prod", "logsum", "logsumexp", "l1", "l2", "sumsquare", "median")


def _reduce(op_type: str, t: Tensor, axis: Axis, keepdims: bool):
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, op_type)
    check_numeric(op_type, t)
    axes = normalize_axes(axis, t.rank)
    empty = [a for a in axes if t.shape[a] == 0]
    if empty:  # the lowering has no identity to write; say so here rather than at Session creation
        raise ValueError(f"{op_type}: axis {empty[0]} of tensor {t.id} (shape {t.shape}) is empty; reducing over "
                         "an empty axis is not supported: slice or pad the tensor so the axis has elements.")
    shape = reduced_shape(t.shape, axes, bool(keepdims))
    attrs = {"axes": axes, "keepdims": bool(keepdims)}
    if op_type == "median":
        op = create_op("median", [t], [(shape, t.dtype), (shape, dtypes.int32)], attrs,
                       out_names=["median_out", "median_indices_out"])
        return op.outputs[0]
    return single(op_type, [t], shape, t.dtype, attrs)


def _reduce_op(op_type: str, doc: str):
    def fn(t: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
        return _reduce(op_type, t, axis, keepdims)

    fn.__name__ = fn.__qualname__ = op_type
    fn.__doc__ = (f"{doc} over ``axis`` (an int, a list of ints, or None for every axis; negative axes "
                  "count from the end). With ``keepdims`` the reduced axes stay with size 1.")
    return op_debug_context(fn)


sum = _reduce_op("sum", "Sum of the elements")
mean = _reduce_op("mean", "Mean of the elements")
max = _reduce_op("max", "Maximum of the elements")
min = _reduce_op("min", "Minimum of the elements")
prod = _reduce_op("prod", "Product of the elements")
logsum = _reduce_op("logsum", "Log of the sum of the elements")
logsumexp = _reduce_op("logsumexp", "Log of the sum of the exponentials of the elements")
l1 = _reduce_op("l1", "Sum of the absolute values of the elements")
l2 = _reduce_op("l2", "Square root of the sum of squares of the elements")
sumsquare = _reduce_op("sumsquare", "Sum of the squares of the elements")
median = _reduce_op("median", "Median of the elements (the lower one for an even count)")


def _arg_reduce(op_type: str, t: Tensor, dim: Optional[int], keepdim: Optional[bool]) -> Tensor:
    check_numeric(op_type, t)
    axis = normalize_axis(0 if dim is None else dim, t.rank, "dim")
    shape = reduced_shape(t.shape, (axis,), bool(keepdim))
    return single(op_type, [t], shape, dtypes.int32, {"axis": axis, "keepdims": bool(keepdim)})


@op_debug_context
def argmax(t: Tensor, dim: Optional[int] = 0, keepdim: Optional[bool] = False) -> Tensor:
    """Index (int32) of the maximum along ``dim``."""
    return _arg_reduce("argmax", t, dim, keepdim)


@op_debug_context
def argmin(t: Tensor, dim: Optional[int] = 0, keepdim: Optional[bool] = False) -> Tensor:
    """Index (int32) of the minimum along ``dim``."""
    return _arg_reduce("argmin", t, dim, keepdim)


@op_debug_context
def cumsum(t: Tensor, dim: Optional[int] = 0) -> Tensor:
    """Cumulative sum along ``dim``."""
    check_numeric("cumsum", t)
    axis = normalize_axis(0 if dim is None else dim, t.rank, "dim")
    return _cumsum(t, axis, False, False)


def _cumsum(t: Tensor, axis: int, exclusive: bool, reverse: bool) -> Tensor:
    """Cumulative sum along ``axis``, without the element itself (``exclusive``) and / or from the
    end (``reverse``): ONNX's / PopART's CumSum (its frontends reach it through popxl._frontends)."""
    check_numeric("cumsum", t)
    axis = normalize_axis(axis, t.rank)
    return single("cumsum", [t], t.shape, t.dtype, {"axis": axis, "exclusive": bool(exclusive),
                                                    "reverse": bool(reverse)})


@op_debug_context
def topk(t: Tensor, k: int, axis: int, largest: bool, sorted: bool,
         available_memory_proportion: Optional[float] = None) -> Tuple[Tensor, Tensor]:
    """The ``k`` largest (or smallest) elements along ``axis`` and their int32 indices."""
    check_numeric("topk", t)
    axis = normalize_axis(axis, t.rank)
    k = int(k)
    if not 0 <= k <= t.shape[axis]:
        raise ValueError(f"topk: k={k} must be between 0 and the size {t.shape[axis]} of axis {axis}.")
    shape = t.shape[:axis] + (k,) + t.shape[axis + 1:]
    op = create_op("topk", [t], [(shape, t.dtype), (shape, dtypes.int32)],
                   {"k": k, "axis": axis, "largest": bool(largest), "sorted": bool(sorted),
                    "available_memory_proportion": available_memory_proportion},
                   out_names=["topk_values", "topk_indices"])
    return op.outputs[0], op.outputs[1]
