"""Updater terms of Adam, LAMB and AdaMax (one ``adam_updater`` op type with a ``mode`` attr)."""
from typing import Optional, Union

from popxl.context import op_debug_context
from popxl.tensor import Tensor

from .._shapes import check_float
from .utils import handle_optimizer_value, var_update
from .._op_builder import not_a_tensor

__all__ = ["weight_decay_is_required", "create_adamupdater", "adam_updater", "lamb_updater", "adamax_updater"]

_NAMES = {0: "weight", 1: "acc_first_order", 2: "acc_second_order", 3: "time_step", 4: "weight_decay",
          5: "beta1", 6: "beta2", 7: "epsilon"}


def weight_decay_is_required(weight_decay: Union[None, float, Tensor]):
    if isinstance(weight_decay, Tensor):
        return True
    return weight_decay is not None and weight_decay != 0.0


def create_adamupdater(acc_first_order: Tensor, acc_second_order: Tensor, ins, mode, weight: Optional[Tensor] = None,
                       time_step: Optional[Tensor] = None, weight_decay: Optional[Union[float, Tensor]] = None,
                       beta1: Optional[Union[float, Tensor]] = None, beta2: Optional[Union[float, Tensor]] = None,
                       epsilon: Union[float, Tensor] = 1e-07) -> Tensor:
    """Record the ``adam_updater`` op. ``ins`` maps input indices to the tensors already chosen."""
    for name, x in (("acc_first_order", acc_first_order), ("acc_second_order", acc_second_order)):
        if not isinstance(x, Tensor):
            raise not_a_tensor(name, x, f"{mode} updater")
        check_float(f"{mode} updater", x)
    if acc_first_order.shape != acc_second_order.shape:
        raise ValueError(f"{mode} updater: the accumulators have different shapes: {acc_first_order.shape} "
                         f"and {acc_second_order.shape}.")
    if 0 in ins and ins[0].shape != acc_first_order.shape:
        raise ValueError(f"{mode} updater: weight {ins[0].shape} and accumulators {acc_first_order.shape} differ.")
    if 3 in ins and ins[3].nelms != 1:
        raise ValueError(f"{mode} updater: time_step must be a scalar, got {ins[3]}.")
    attrs = {"mode": mode}
    for key, value, idx in (("weight_decay", weight_decay, 4), ("beta1", beta1, 5), ("beta2", beta2, 6),
                            ("epsilon", epsilon, 7)):
        attrs[key] = handle_optimizer_value(value, ins, idx).val
    # The op increments time_step in place; its output is a new tensor, of the weight's dtype when
    # the weight is an input, else of the first moment's (PopART's AdamUpdaterOp::setup)
    out_dtype = ins[0].dtype if 0 in ins else acc_first_order.dtype
    return var_update("adam_updater", ins, _NAMES, attrs, acc_first_order.shape, out_dtype,
                      updated=None, extra_modified=(3,))


def _updater(kind: str, m: Tensor, v: Tensor, weight, time_step, weight_decay, beta1, beta2, epsilon) -> Tensor:
    ins = {1: m, 2: v}
    if weight_decay_is_required(weight_decay):
        if weight is None:
            raise ValueError("Weight decay requires weight to be not None.")
        ins[0] = weight
    if kind == "adamax":
        if time_step is None:
            raise ValueError("AdaMax requires time_step not None.")
        ins[3] = time_step
        mode = "adamax"
    elif time_step is not None:
        if beta1 is None or beta2 is None:
            raise ValueError("Bias correction requires both beta1 and beta2 not None.")
        ins[3] = time_step
        mode = kind
    else:
        mode = kind + "_no_bias"
    return create_adamupdater(m, v, ins, mode, weight, time_step, weight_decay, beta1, beta2, epsilon)


@op_debug_context
def adam_updater(acc_first_order: Tensor, acc_second_order: Tensor, weight: Optional[Tensor] = None,
                 time_step: Optional[Tensor] = None, weight_decay: Optional[Union[float, Tensor]] = None,
                 beta1: Optional[Union[float, Tensor]] = None, beta2: Optional[Union[float, Tensor]] = None,
                 epsilon: Union[float, Tensor] = 1e-07) -> Tensor:
    """Adam updater ``mc / (sqrt(vc) + eps) + wd * w``; bias correction (``mc = m / (1 - b1 ** t)``,
    ``vc = v / (1 - b2 ** t)``) when ``time_step`` is given, which is incremented."""
    return _updater("adam", acc_first_order, acc_second_order, weight, time_step, weight_decay, beta1, beta2, epsilon)


@op_debug_context
def lamb_updater(acc_first_order: Tensor, acc_second_order: Tensor, weight: Optional[Tensor] = None,
                 time_step: Optional[Tensor] = None, weight_decay: Optional[Union[float, Tensor]] = None,
                 beta1: Optional[Union[float, Tensor]] = None, beta2: Optional[Union[float, Tensor]] = None,
                 epsilon: Union[float, Tensor] = 1e-07) -> Tensor:
    """LAMB updater (same formula as Adam's; the trust ratio is applied by ``adam_var_update``)."""
    return _updater("lamb", acc_first_order, acc_second_order, weight, time_step, weight_decay, beta1, beta2, epsilon)


@op_debug_context
def adamax_updater(acc_first_order: Tensor, acc_second_order: Tensor, weight: Optional[Tensor] = None,
                   time_step: Optional[Tensor] = None, weight_decay: Optional[Union[float, Tensor]] = None,
                   beta1: Union[float, Tensor] = 0.9, epsilon: Union[float, Tensor] = 1e-07) -> Tensor:
    """AdaMax updater ``mc / (v + eps) + wd * w`` with ``mc = m / (1 - b1 ** t)``."""
    return _updater("adamax", acc_first_order, acc_second_order, weight, time_step, weight_decay, beta1, None,
                    epsilon)
