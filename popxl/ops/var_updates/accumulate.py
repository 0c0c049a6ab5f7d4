"""In-place accumulator updates (recorded as ``accumulate``, ``accumulator_scale`` and
``sparse_accumulate`` ops; the output aliases the updated tensor ``t``)."""
from typing import Optional, Union

from popxl.context import op_debug_context
from popxl.tensor import Tensor

from .._shapes import broadcast_shapes, check_float, check_int, check_numeric, normalize_axis
from .utils import handle_optimizer_value, var_update
from .._op_builder import not_a_tensor

__all__ = ["accumulate_", "accumulate_square_", "accumulate_mean_", "accumulate_moving_average_",
           "accumulate_moving_average_square_", "accumulator_scale_", "accumulator_zero_", "sparse_accumulate_"]

_NAMES = {0: "t", 1: "X", 2: "f"}


def _check(op: str, t: Tensor, X: Tensor):
    for name, x in (("t", t), ("X", X)):
        if not isinstance(x, Tensor):
            raise not_a_tensor(name, x, op)
    # integer accumulators are allowed, as in PopXL (its remote-variable example accumulates int32)
    check_numeric(op, t)
    check_numeric(op, X)
    if broadcast_shapes(t.shape, X.shape, what=f"{op} operands") != t.shape:
        raise ValueError(f"{op}: X of shape {X.shape} cannot be accumulated into t of shape {t.shape}.")


def _accumulate(kind: str, t: Tensor, X: Tensor, f) -> Tensor:
    _check("accumulate", t, X)
    ins = {0: t, 1: X}
    factor = handle_optimizer_value(f, ins, 2)
    attrs = {"accumulation_type": kind, "factor": factor.val}
    return var_update("accumulate", ins, _NAMES, attrs, t.shape, t.dtype)


@op_debug_context
def accumulate_(t: Tensor, X: Tensor, f: Optional[Union[float, Tensor]] = None) -> Tensor:
    """``t += X`` (``f`` None) or ``t += f * X``."""
    return _accumulate("add" if f is None else "dampened_add", t, X, f)


@op_debug_context
def accumulate_square_(t: Tensor, X: Tensor, f: Union[float, Tensor] = 1.0) -> Tensor:
    """``t += f * X ** 2``."""
    return _accumulate("dampened_add_square", t, X, f)


@op_debug_context
def accumulate_mean_(t: Tensor, X: Tensor, step: Union[float, Tensor]) -> Tensor:
    """Running mean: ``t = (step * t + X) / (step + 1)``."""
    return _accumulate("mean", t, X, step)


@op_debug_context
def accumulate_moving_average_(t: Tensor, X: Tensor, f: Union[float, Tensor]) -> Tensor:
    """``t = f * t + (1 - f) * X``."""
    return _accumulate("moving_average", t, X, f)


@op_debug_context
def accumulate_moving_average_square_(t: Tensor, X: Tensor, f: Union[float, Tensor]) -> Tensor:
    """``t = f * t + (1 - f) * X ** 2``."""
    return _accumulate("moving_average_square", t, X, f)


@op_debug_context
def accumulator_scale_(t: Tensor, f: Union[float, Tensor]) -> Tensor:
    """``t *= f`` (``f == 0`` zeroes ``t``)."""
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, "accumulator_scale_")
    check_float("accumulator_scale_", t)
    ins = {0: t}
    factor = handle_optimizer_value(f, ins, 2)
    return var_update("accumulator_scale", ins, _NAMES, {"factor": factor.val}, t.shape, t.dtype)


@op_debug_context
def accumulator_zero_(t: Tensor) -> Tensor:
    """``t = 0``."""
    return accumulator_scale_(t, 0.0)


@op_debug_context
def sparse_accumulate_(t: Tensor, X: Tensor, indices: Tensor, axis: int = 0, f: Optional[Union[float, Tensor]] = None,
                       W: Optional[Tensor] = None) -> Tensor:
    """``t[indices] += f * X`` along ``axis`` (X has the shape of ``gather(t, indices, axis)``).
    ``W`` is the weight ``t`` accumulates gradients of, when it is gathered with ``tied_gather``."""
    for name, x in (("t", t), ("X", X), ("indices", indices)):
        if not isinstance(x, Tensor):
            raise not_a_tensor(name, x, "sparse_accumulate_")
    check_float("sparse_accumulate_", t)
    check_int("sparse_accumulate_", indices)
    axis = normalize_axis(axis, t.rank)
    expected = t.shape[:axis] + indices.shape + t.shape[axis + 1:]
    if X.shape != expected:
        raise ValueError(f"sparse_accumulate_: X must have shape {expected} (t {t.shape} gathered at indices "
                         f"{indices.shape} along axis {axis}), got {X.shape}.")
    ins = {0: t, 1: X, 3: indices}
    factor = handle_optimizer_value(f, ins, 2)
    if W is not None:
        if not isinstance(W, Tensor) or W.shape != t.shape:
            raise ValueError(f"sparse_accumulate_: W must be a tensor of the shape of t {t.shape}, got {W}.")
        ins[4] = W
    attrs = {"accumulation_type": "add" if f is None else "dampened_add", "factor": factor.val, "axis": axis}
    return var_update("sparse_accumulate", ins, {**_NAMES, 3: "indices", 4: "W"}, attrs, t.shape, t.dtype)
