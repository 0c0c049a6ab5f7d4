"""Replicated tensor sharding (RTS): variables split in equal shards across the replicas of a group.

``replica_sharded_variable`` returns the variable (its full value, what the host reads and writes)
and the tensor of this replica's shard, which ops use. As in PopXL, the shard is loaded when the
weights go to the device and stored back when they come to the host, so it behaves like an on-chip
variable holding ``ceil(nelms / shard_over)`` elements. Replica of rank k in its group (members in
replica order) holds shard ``k % shard_over`` of its group's value: the value is sharded over
every ``shard_over`` consecutive members of the group, repeatedly (PopXL's shard_over). The
flattened value is cut in order and the last shard is padded with zeros.

The simulator keeps the shard on chip (the Session scatters and gathers it); remote buffers for
sharded variables (``replica_sharded_buffer``, ``remote_replica_sharded_variable``) describe the
same split for streaming memory.
"""
from typing import Literal, Optional, Tuple

import numpy as np

from popxl import dtypes
from popxl.context import ExecutionContext, _execution_context, gcg
from popxl.replica_grouping import ReplicaGrouping

__all__ = ["shard_settings", "replica_sharded_buffer", "replica_sharded_variable", "shard_numel"]


def shard_settings(ir, replica_grouping: Optional[ReplicaGrouping], shard_over: Optional[int],
                   shard_grouping: Optional[ReplicaGrouping] = None):
    """(grouping, shard_over) with the defaults filled in and checked. ``shard_grouping`` (SDK 3.0's
    form: the replicas that share one copy, consecutive members of a variable group) gives
    shard_over as its group size."""
    rg = ir.replica_grouping() if replica_grouping is None else replica_grouping
    if not isinstance(rg, ReplicaGrouping):
        raise TypeError(f"replica_grouping must be a popxl.ReplicaGrouping, not {type(rg).__name__}.")
    if shard_grouping is not None:
        if shard_over is not None:
            raise ValueError("Give shard_over or shard_grouping, not both.")
        sg = shard_grouping
        inside = sg.is_const and rg.is_const and sg.group_size <= rg.group_size and \
            (sg.group_size == 1 or sg.stride == rg.stride) and rg.group_size % sg.group_size == 0
        if not inside:
            raise ValueError(f"The shard grouping {sg} must take consecutive members of the groups of the "
                             f"replica grouping {rg} (same stride, a group size that divides it).")
        shard_over = sg.group_size
    so = rg.group_size if shard_over is None else shard_over
    if isinstance(so, bool) or int(so) != so or so < 1:
        raise ValueError(f"shard_over must be a positive integer, not {shard_over!r}.")
    so = int(so)
    # PopXL's two checks, in its words; a grouping of size 1 (every replica its own value) can only
    # be "sharded" over shard_over=1.
    if so > rg.group_size:
        raise ValueError(
            f"The sharding group size ({so}) must be less than or equal to the replica group size "
            f"({rg.group_size}). Note that if no replica grouping was passed, the replica group size defaults "
            "to the IR's global replication factor; and if no sharding group size was passed, it defaults to "
            f"the replica group size. (shard_over={so}, replica grouping: {rg}.)")
    if rg.group_size % so != 0:
        raise ValueError(
            f"The replica group size ({rg.group_size}) must be divisible by the sharding group size ({so}). "
            "Note that if no replica grouping was passed, the replica group size defaults to the IR's global "
            "replication factor; and if no sharding group size was passed, it defaults to the replica group "
            f"size. (shard_over={so}, replica grouping: {rg}.)")
    return rg, so


def shard_numel(nelms: int, shard_over: int) -> int:
    return -(-int(nelms) // int(shard_over))


def replica_sharded_buffer(shape: Tuple[int, ...], dtype: dtypes.dtype,
                           replica_grouping: Optional[ReplicaGrouping] = None, shard_over: Optional[int] = None,
                           entries: int = 1, shard_grouping: Optional[ReplicaGrouping] = None):
    """A remote buffer whose entries hold one replica's shard of a variable of ``shape``.

    ``shape`` is the variable's host shape: with several groups it starts with the group axis.
    The buffer's tensor shape is the flat shard, ``(ceil(nelms / shard_over),)`` with nelms of one
    group's value, and its meta shape the group's value shape.
    """
    from popxl.remote_buffer import remote_buffer

    ir = gcg().ir
    rg, so = shard_settings(ir, replica_grouping, shard_over, shard_grouping)
    shape = tuple(int(s) for s in shape)
    if rg.num_groups > 1:
        if not shape or shape[0] != rg.num_groups:
            raise ValueError(f"replica_sharded_buffer: the shape {shape} must start with the number of replica "
                             f"groups ({rg.num_groups}).")
        shape = shape[1:]
    nelms = int(np.prod(shape, dtype=np.int64))
    buf = remote_buffer((shard_numel(nelms, so),), dtype, entries)
    buf.meta_shape = shape
    buf._replica_sharded(so, rg)
    return buf


def replica_sharded_variable(data, dtype: Optional[dtypes.dtype] = None, name: Optional[str] = None,
                             downcast: bool = True, replica_grouping: Optional[ReplicaGrouping] = None,
                             shard_over: Optional[int] = None,
                             retrieval_mode: Optional[Literal["one_per_group", "all_replicas"]] = "one_per_group",
                             log2_scale: Optional[int] = None, nan_on_overflow: Optional[bool] = None,
                             shard_grouping: Optional[ReplicaGrouping] = None):
    """(variable, shard): a variable sharded over replicas, and the tensor of this replica's shard."""
    from popxl.ops._op_builder import single
    from popxl.tensor import variable

    g = gcg()
    rg, so = shard_settings(g.ir, replica_grouping, shard_over, shard_grouping)
    var = variable(data, dtype, name, downcast, rg, retrieval_mode, log2_scale, nan_on_overflow)
    var._replica_sharded(so)
    m = shard_numel(var.nelms, so)
    with _execution_context(ExecutionContext.WeightsFromHostFragment):
        shard = single("rts_shard", [], (m,), var.dtype, {"variable": var, "shard_over": so},
                       out_names=[var.name + "_rts"], out_meta_shapes=[var.shape])
    var._replica_sharded(so, shard)
    return var, shard
