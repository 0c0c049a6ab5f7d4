"""AllReduce across replicas."""
from typing import Optional

from popxl.context import op_debug_context
from popxl.replica_grouping import ReplicaGrouping
from popxl.tensor import Tensor

from .._op_builder import single, not_a_tensor
from .collectives import CollectiveOps, _group, check_not_float8, to_collective_op

__all__ = ["replicated_all_reduce", "replicated_all_reduce_"]


def _check(t: Tensor, op: str, what: str) -> None:
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, what)
    if op == "mean" and not t.dtype.is_floating_point:
        raise TypeError(f"{what}: op 'mean' needs a floating point tensor, {t.id} is {t.dtype}.")


@op_debug_context
def replicated_all_reduce(t: Tensor, op: CollectiveOps = "add", group: Optional[ReplicaGrouping] = None) -> Tensor:
    """Reduce ``t`` over the replicas of each group of ``group`` (default: all replicas); every
    replica of a group gets the result.

    Args:
        t: the tensor to reduce.
        op: 'add', 'mean', 'mul' (PopXL 3.x runs it as 'mean'), 'min', 'max', 'and', 'or' or 'square_add'.
        group: the replicas that reduce together. Defaults to all replicas.
    """
    op = to_collective_op(op)
    _check(t, op, "replicated_all_reduce")
    check_not_float8(t, op, "replicated_all_reduce")
    group = _group(t, group, "replicated_all_reduce")
    return single("replicated_all_reduce", [t], t.shape, t.dtype, {"op": op, "group": group},
                  out_names=[t.name + "_all_reduce"], out_meta_shapes=[t.meta_shape])


@op_debug_context
def replicated_all_reduce_(t: Tensor, op: CollectiveOps = "add", group: Optional[ReplicaGrouping] = None) -> Tensor:
    """:func:`replicated_all_reduce` in place: ``t`` holds the result afterwards."""
    op = to_collective_op(op)
    _check(t, op, "replicated_all_reduce_")
    check_not_float8(t, op, "replicated_all_reduce_")
    group = _group(t, group, "replicated_all_reduce_")
    return single("replicated_all_reduce", [t], t.shape, t.dtype, {"op": op, "group": group},
                  out_names=[t.name + "_all_reduce"], modified=[0], aliases={0: 0}, out_meta_shapes=[t.meta_shape])
