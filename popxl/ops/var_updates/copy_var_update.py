"""Overwrite a tensor with another."""
from popxl.context import op_debug_context
from popxl.tensor import Tensor

from .utils import var_update
from .._op_builder import not_a_tensor

__all__ = ["copy_var_update_"]


@op_debug_context
def copy_var_update_(t: Tensor, X: Tensor) -> Tensor:
    """``t = X`` in place (same shape and dtype)."""
    for name, v in (("t", t), ("X", X)):
        if not isinstance(v, Tensor):
            raise not_a_tensor(name, v, "copy_var_update_")
    if t.shape != X.shape or t.dtype != X.dtype:
        raise ValueError(f"copy_var_update_: X ({X.dtype.name} {X.shape}) must have the shape and dtype of "
                         f"t ({t.dtype.name} {t.shape}).")
    return var_update("copy_var_update", {0: t, 1: X}, {0: "t", 1: "X"}, {}, t.shape, t.dtype)
