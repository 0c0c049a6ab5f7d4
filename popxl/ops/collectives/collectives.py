"""Shared pieces of the collective ops: operator names, the older CommGroup form of a grouping, and
the rearrangements that let a collective work along any axis."""
from enum import Enum
from typing import Dict, List, Literal, Optional, Tuple

from popxl.replica_grouping import ReplicaGrouping
from popxl.tensor import Tensor

__all__ = ["CollectiveOps", "CommGroupType", "CommGroup", "to_collective_op"]

CollectiveOps = Literal["add", "mean", "mul", "min", "max", "and", "or", "square_add", "local"]

# PopXL 3.x maps 'mul' to the MEAN collective operator (popxl/ops/collectives/collectives.py,
# OP_MAP); scripts written for the SDK get the same result here.
_OP_MAP: Dict[str, CollectiveOps] = {"add": "add", "mean": "mean", "mul": "mean", "min": "min", "max": "max",
                                     "and": "and", "or": "or", "square_add": "square_add", "local": "local"}


def to_collective_op(op: CollectiveOps) -> CollectiveOps:
    """The collective operator an op name stands for (raises ValueError for an unknown name)."""
    if op not in _OP_MAP:
        raise ValueError(f"Not a valid op: {op}. Must choose from: {', '.join(k for k in _OP_MAP if k != 'local')}")
    return _OP_MAP[op]


def check_not_float8(t, op: str, what: str) -> None:
    """float8 data crosses replicas unchanged (gather, slice, 'local') but is not reduced."""
    from popxl import dtypes
    if op != "local" and getattr(t, "dtype", None) in dtypes.FLOAT8_DTYPES:
        raise TypeError(f"{what}: {t.id} is {t.dtype.name}, which collectives cannot reduce ('{op}'); convert it "
                        "with ops.pow2scale_cast_from_fp8 first (all-gather and slicing move float8 as it is).")


class CommGroupType(Enum):
    """How replicas are grouped for a collective (the older PopART API)."""
    All = 0
    Consecutive = 1
    Orthogonal = 2
    Ungrouped = 3

    @property
    def value_name(self) -> str:
        return self.name


class CommGroup:
    """A replica grouping in the older PopART form: a type and a group size."""

    def __init__(self, type: CommGroupType = CommGroupType.All, replicaGroupSize: int = 0):
        self.type = type
        self.replicaGroupSize = int(replicaGroupSize)

    def toReplicaGrouping(self, numReplicas: int) -> ReplicaGrouping:
        """The equivalent ReplicaGrouping of ``numReplicas`` replicas (in the current Ir)."""
        from popxl.context import get_current_context
        ir = get_current_context().ir
        if ir.replication_factor != numReplicas:
            raise ValueError(f"CommGroup.toReplicaGrouping({numReplicas}): the current Ir has "
                             f"{ir.replication_factor} replicas.")
        k = self.replicaGroupSize
        if self.type == CommGroupType.All:
            return ir.replica_grouping(1, numReplicas)
        if self.type == CommGroupType.Ungrouped:
            return ir.replica_grouping(1, 1)
        if k < 1 or numReplicas % k:
            raise ValueError(f"CommGroup {self.type.name} with group size {k} does not divide {numReplicas} replicas.")
        if self.type == CommGroupType.Consecutive:
            return ir.replica_grouping(1, k)
        return ir.replica_grouping(numReplicas // k, k)

    def __repr__(self) -> str:
        return f"CommGroup(type={self.type.name}, replicaGroupSize={self.replicaGroupSize})"


def _group(t: Tensor, group: Optional[ReplicaGrouping], what: str) -> ReplicaGrouping:
    """The grouping a collective runs over: ``group`` or all replicas; it must be const."""
    ir = t.ir
    if group is None:
        return ir.replica_grouping()
    if isinstance(group, CommGroup):
        group = group.toReplicaGrouping(ir.replication_factor)
    if not isinstance(group, ReplicaGrouping):
        raise TypeError(f"{what}: group must be a popxl.ReplicaGrouping, not {type(group).__name__}: {group!r}.")
    if group.num_replicas != ir.replication_factor:
        raise ValueError(f"{what}: the grouping {group} is over {group.num_replicas} replicas but the Ir has "
                         f"{ir.replication_factor}.")
    if not group.is_const:
        raise ValueError(f"{what}: the replica grouping {group} has no constant stride; collectives (GCL) need "
                         "groups whose members are a constant stride apart.")
    return group


def _rearrange_input(t: Tensor, axis: int) -> Tuple[Tensor, List[int]]:
    """``t`` with ``axis`` moved first, flattened; and the shape before flattening."""
    if axis > 0:
        perm = list(range(t.rank))
        perm.pop(axis)
        perm.insert(0, axis)
        t = t.transpose(perm)
    shape = list(t.shape)
    return t.flatten(), shape


def _rearrange_output(y: Tensor, new_shape: List[int], axis: int, rank: int) -> Tensor:
    """Undo ``_rearrange_input`` on a collective's flat output: reshape to ``new_shape`` (axis first)
    and move that axis back to ``axis`` (when the output kept it: rank == len(new_shape))."""
    y = y.reshape(tuple(new_shape))
    if axis > 0 and len(new_shape) == rank:
        perm = list(range(rank))
        perm.pop(0)
        perm.insert(axis, 0)
        y = y.transpose(perm)
    return y


def _normalise_axis(t: Tensor, axis, what: str) -> int:
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise ValueError(f"Axis should be an int. Type: {type(axis)}. Value: {axis}")
    if t.rank == 0:
        return 0
    if not -t.rank <= axis < t.rank:
        raise ValueError(f"{what}: axis {axis} is out of range for a tensor of rank {t.rank}.")
    return axis % t.rank
