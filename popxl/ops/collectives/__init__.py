"""Collective ops: across the replicas of a replicated program (``replicated_*``, RTS slicing) and
across the IPUs of one replica (``all_reduce``). The module layout follows PopXL's
(``popxl.ops.collectives.replicated_all_gather`` and so on)."""
from .all_reduce import all_reduce, all_reduce_identical_grad_inputs, all_reduce_identical_inputs
from .collectives import CollectiveOps, CommGroup, CommGroupType, to_collective_op
from .replicated_all_gather import replicated_all_gather
from .replicated_all_reduce import replicated_all_reduce, replicated_all_reduce_
from .replicated_reduce_scatter import replica_sharded_slice, replicated_reduce_scatter, replicated_slice

__all__ = ["CommGroupType", "CommGroup", "CollectiveOps", "to_collective_op", "all_reduce",
           "all_reduce_identical_inputs", "all_reduce_identical_grad_inputs", "replicated_all_gather",
           "replicated_all_reduce", "replicated_all_reduce_", "replicated_reduce_scatter", "replica_sharded_slice",
           "replicated_slice"]
