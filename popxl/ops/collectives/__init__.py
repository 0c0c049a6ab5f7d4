"""Collective ops across replicas and IPUs. They arrive with issue 7 (replication); until then
each raises NotImplementedError."""
from enum import Enum
from typing import List, Literal, Optional

from popxl.replica_grouping import ReplicaGrouping
from popxl.tensor import Tensor

__all__ = ["CommGroupType", "CommGroup", "CollectiveOps", "to_collective_op", "all_reduce",
           "all_reduce_identical_inputs", "all_reduce_identical_grad_inputs", "replicated_all_gather",
           "replicated_all_reduce", "replicated_all_reduce_", "replicated_reduce_scatter", "replica_sharded_slice",
           "replicated_slice"]

CollectiveOps = Literal["add", "mean", "mul", "min", "max", "and", "or", "square_add", "local"]
_COLLECTIVE_OPS = ("add", "mean", "mul", "min", "max", "and", "or", "square_add", "local")


def _later(name: str):
    raise NotImplementedError(f"ops.collectives.{name} arrives with issue 7 (replication).")


class CommGroupType(Enum):
    """How replicas are grouped for a collective (the older PopART API)."""
    All = 0
    Consecutive = 1
    Orthogonal = 2
    Ungrouped = 3


class CommGroup:
    """A replica grouping in the older PopART form: a type and a group size."""

    def __init__(self, type: CommGroupType = CommGroupType.All, replicaGroupSize: int = 0):
        self.type = type
        self.replicaGroupSize = replicaGroupSize

    def toReplicaGrouping(self, numReplicas: int) -> ReplicaGrouping:
        _later("CommGroup.toReplicaGrouping")


def to_collective_op(op: CollectiveOps) -> str:
    """Check ``op`` is a collective operator name and return it."""
    if op not in _COLLECTIVE_OPS:
        raise ValueError(f"Unknown collective operation {op!r}; expected one of {_COLLECTIVE_OPS}.")
    return op


def all_reduce(ts: List[Tensor], ipus: Optional[List[int]] = None, op: CollectiveOps = "add") -> List[Tensor]:
    _later("all_reduce")


def all_reduce_identical_inputs(ts: List[Tensor], ipus: Optional[List[int]] = None,
                                op: CollectiveOps = "add") -> List[Tensor]:
    _later("all_reduce_identical_inputs")


def all_reduce_identical_grad_inputs(ts: List[Tensor], ipus: Optional[List[int]] = None,
                                     op: CollectiveOps = "add") -> List[Tensor]:
    _later("all_reduce_identical_grad_inputs")


def replicated_all_gather(t: Tensor, axis: int = 0, group: Optional[ReplicaGrouping] = None,
                          output_shape: Literal["new_axis", "concat", "meta_shape", "auto"] = "auto") -> Tensor:
    _later("replicated_all_gather")


def replicated_all_reduce(t: Tensor, op: CollectiveOps = "add", group: Optional[ReplicaGrouping] = None) -> Tensor:
    _later("replicated_all_reduce")


def replicated_all_reduce_(t: Tensor, op: CollectiveOps = "add", group: Optional[ReplicaGrouping] = None) -> Tensor:
    _later("replicated_all_reduce_")


def replicated_reduce_scatter(t: Tensor, op: CollectiveOps = "add", group: Optional[ReplicaGrouping] = None,
                              configure_output_for_replicated_tensor_sharding: bool = False) -> Tensor:
    _later("replicated_reduce_scatter")


def replica_sharded_slice(t: Tensor, group: Optional[ReplicaGrouping] = None) -> Tensor:
    _later("replica_sharded_slice")


def replicated_slice(t: Tensor, axis: int = 0, group: Optional[ReplicaGrouping] = None) -> Tensor:
    _later("replicated_slice")
