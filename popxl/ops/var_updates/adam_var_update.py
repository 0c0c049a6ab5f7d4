"""The weight update of Adam / LAMB."""
from typing import Optional, Union

from popxl.context import op_debug_context
from popxl.tensor import Tensor

from .._shapes import check_float
from .utils import handle_optimizer_value, var_update
from .._op_builder import not_a_tensor

__all__ = ["adam_var_update"]

_NAMES = {0: "t", 1: "x", 2: "r1", 3: "r2", 4: "learning_rate", 5: "max_weight_norm"}


@op_debug_context
def adam_var_update(t: Tensor, x: Tensor, r1: Tensor, r2: Tensor, learning_rate: Optional[Union[float, Tensor]] = None,
                    max_weight_norm: Optional[Union[float, Tensor]] = None) -> Tensor:
    """``t -= learning_rate * x``, scaled by the LAMB trust ratio ``r1 / r2`` (the norms of ``t``
    and ``x``; pass None for both for Adam), with ``r1`` clipped to ``max_weight_norm``.

    A hyper-parameter given as None is recorded as None in ``attrs``.
    """
    for name, v in (("t", t), ("x", x)):
        if not isinstance(v, Tensor):
            raise not_a_tensor(name, v, "adam_var_update")
    check_float("adam_var_update", t)
    if x.shape != t.shape:
        raise ValueError(f"adam_var_update: the updater x {x.shape} must have the shape of t {t.shape}.")
    ins = {0: t, 1: x}
    for idx, r in ((2, r1), (3, r2)):
        if r is not None:
            if not isinstance(r, Tensor) or r.nelms != 1:
                raise ValueError(f"adam_var_update: `{_NAMES[idx]}` must be a scalar tensor, got {r!r}.")
            ins[idx] = r
    attrs = {"learning_rate": handle_optimizer_value(learning_rate, ins, 4).val,
             "max_weight_norm": handle_optimizer_value(max_weight_norm, ins, 5).val}
    return var_update("adam_var_update", ins, _NAMES, attrs, t.shape, t.dtype)
