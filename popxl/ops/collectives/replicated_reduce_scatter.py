"""ReduceScatter across replicas, and the replica slicing ops built on it."""
from typing import Optional

from popxl.context import op_debug_context
from popxl.replica_grouping import ReplicaGrouping
from popxl.tensor import Tensor

from .._op_builder import single, not_a_tensor
from .collectives import (CollectiveOps, _group, _normalise_axis, _rearrange_input, _rearrange_output, check_not_float8,
                          to_collective_op)

__all__ = ["replicated_reduce_scatter", "replica_sharded_slice", "replicated_slice"]


def _reduce_scatter(t: Tensor, op: str, group: Optional[ReplicaGrouping], configure_rts: bool, suffix: str,
                    what: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, what)
    check_not_float8(t, op, what)
    if op == "mean" and not t.dtype.is_floating_point:
        raise TypeError(f"{what}: op 'mean' needs a floating point tensor, {t.id} is {t.dtype}.")
    group = _group(t, group, what)
    n = group.group_size
    m = -(-t.nelms // n)
    return single("replicated_reduce_scatter", [t], (m,), t.dtype,
                  {"op": op, "group": group, "configure_output_for_replicated_tensor_sharding": bool(configure_rts)},
                  out_names=[t.name + suffix], out_meta_shapes=[t.shape])


@op_debug_context
def replicated_reduce_scatter(t: Tensor, op: CollectiveOps = "add", group: Optional[ReplicaGrouping] = None,
                              configure_output_for_replicated_tensor_sharding: bool = False) -> Tensor:
    """Reduce ``t`` (flattened) over the replicas of each group and give each replica its slice of
    the result: ``ceil(t.nelms / group_size)`` elements (the last slices padded with zeros), a 1-D
    tensor whose meta shape is ``t.shape``.

    Args:
        op: 'add', 'mean', 'mul' (run as 'mean', as PopXL 3.x does), 'min', 'max', 'and', 'or', 'square_add'.
        group: the replicas that reduce together. Defaults to all replicas.
        configure_output_for_replicated_tensor_sharding: mark the output as a replica shard (RTS).
    """
    return _reduce_scatter(t, to_collective_op(op), group, configure_output_for_replicated_tensor_sharding,
                           "_reduce_scattered", "replicated_reduce_scatter")


@op_debug_context
def replica_sharded_slice(t: Tensor, group: Optional[ReplicaGrouping] = None) -> Tensor:
    """The replica-sharded slice of ``t``: replica of rank k in its group takes elements
    ``[k m, (k + 1) m)`` of the flattened ``t``, ``m = ceil(t.nelms / group_size)`` (1-D, meta shape ``t.shape``)."""
    return _reduce_scatter(t, "local", group, True, "_sharded_slice", "replica_sharded_slice")


@op_debug_context
def replicated_slice(t: Tensor, axis: int = 0, group: Optional[ReplicaGrouping] = None) -> Tensor:
    """Each replica takes an equal slice of ``t`` along ``axis``: with shape (2, 4), two replicas and
    axis 0, the first replica gets ``t[0:1]`` and the second ``t[1:2]``. When the slices are one
    element thick the axis is dropped. Its gradient is a :func:`replicated_all_gather`.

    Raises:
        ValueError: if the group size does not divide ``t.shape[axis]``.
    """
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, "replicated_slice")
    axis = _normalise_axis(t, axis, "replicated_slice")
    g = _group(t, group, "replicated_slice")
    if t.rank == 0 or t.shape[axis] % g.group_size != 0:
        raise ValueError(f"Replicated slice must equally divide axis. Axis size: "
                         f"{t.shape[axis] if t.rank else 0}. Replica group size: {g.group_size}")
    flat, shape = _rearrange_input(t, axis)
    if shape[0] // g.group_size == 1:
        shape.pop(0)
    else:
        shape[0] //= g.group_size
    out = _reduce_scatter(flat, "local", g, False, "_replicated_slice", "replicated_slice")
    return _rearrange_output(out, shape, axis, t.rank)
